#include "transport/verbs/verbs_choices.hpp"

#include <algorithm>
#include <cmath>

namespace eb {
namespace {

bool ipv4_mapped(const std::array<std::uint8_t, 16>& gid) {
    return std::all_of(gid.begin(), gid.begin() + 10, [](std::uint8_t b) { return b == 0; }) && gid[10] == 0xff &&
           gid[11] == 0xff;
}
bool link_local(const std::array<std::uint8_t, 16>& gid) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }
bool empty(const std::array<std::uint8_t, 16>& gid) {
    return std::all_of(gid.begin(), gid.end(), [](std::uint8_t b) { return b == 0; });
}

}  // namespace

std::optional<std::uint32_t> pick_gid_index(std::span<const Gid_candidate> candidates) {
    // Lower rank is better; link-local and empty entries are never chosen.
    auto preference = [](const Gid_candidate& candidate) -> int {
        if (empty(candidate.gid) || link_local(candidate.gid) || candidate.kind == Gid_kind::infiniband) return -1;
        const int version = candidate.kind == Gid_kind::roce_v2 ? 0 : 2;
        return version + (ipv4_mapped(candidate.gid) ? 0 : 1);
    };
    std::optional<std::uint32_t> best;
    int best_preference = 0;
    for (const Gid_candidate& candidate : candidates) {
        const int rank = preference(candidate);
        if (rank < 0) continue;
        if (!best || rank < best_preference || (rank == best_preference && candidate.index < *best)) {
            best = candidate.index;
            best_preference = rank;
        }
    }
    return best;
}

Qp_timeouts qp_timeouts(std::uint32_t peer_timeout_ms) {
    constexpr std::uint8_t retry_count = 7;  // the most the 3-bit field holds: rides out lost packets
    const double per_try_us = peer_timeout_ms * 1000.0 / (retry_count + 1);
    const int exponent = static_cast<int>(std::floor(std::log2(per_try_us / 4.096)));
    return {static_cast<std::uint8_t>(std::clamp(exponent, 1, 31)), retry_count};
}

double give_up_ms(const Qp_timeouts& timeouts) {
    return (timeouts.retry_count + 1) * 4.096e-3 * std::ldexp(1.0, timeouts.timeout);
}

Link_failure link_failure_of(ibv_wc_status status) {
    switch (status) {
        case IBV_WC_RETRY_EXC_ERR:
        case IBV_WC_RNR_RETRY_EXC_ERR: return Link_failure::timeout;
        case IBV_WC_REM_OP_ERR:
        case IBV_WC_REM_ABORT_ERR:
        case IBV_WC_REM_INV_REQ_ERR:
        case IBV_WC_REM_ACCESS_ERR: return Link_failure::reset;
        default: return Link_failure::error;
    }
}

std::optional<std::string> check_qp_address(const Qp_address& address, std::uint32_t rank, std::uint8_t link_layer) {
    if (address.magic != Qp_address::magic_value)
        return "it sent no queue-pair address: does it run --transport verbs? every unit of a set needs the same "
               "--transport";
    if (address.version != Qp_address::version_value)
        return "it speaks queue-pair address version " + std::to_string(address.version) + ", this unit " +
               std::to_string(Qp_address::version_value) + ": run the same builder version on every unit";
    if (address.rank != rank)
        return "its queue-pair address says rank " + std::to_string(address.rank) + ", expected " + std::to_string(rank);
    if (address.link_layer != link_layer)
        return std::string("its RDMA port is ") + (address.link_layer == 1 ? "InfiniBand" : "Ethernet") +
               ", this unit's " + (link_layer == 1 ? "InfiniBand" : "Ethernet") +
               ": the units of a set need one fabric";
    if (address.mtu < 1 || address.mtu > 5) return "its path MTU code " + std::to_string(address.mtu) + " is not 1..5";
    if (link_layer == 2 && address.has_gid == 0) return "its RoCE port sent no GID";
    if ((address.control_qpn | address.data_qpn) >> 24 != 0 || address.control_qpn == 0 || address.data_qpn == 0)
        return "its queue-pair numbers " + std::to_string(address.control_qpn) + ", " +
               std::to_string(address.data_qpn) + " are not 24-bit numbers";
    if ((address.control_psn | address.data_psn) >> 24 != 0) return "its packet sequence numbers are not 24-bit";
    return std::nullopt;
}

}  // namespace eb
