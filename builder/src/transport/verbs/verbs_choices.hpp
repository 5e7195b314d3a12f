#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "transport/transport.hpp"

namespace eb {

// The decisions the verbs transport makes from what the device reports,
// kept pure so they are table-tested without a device.

enum class Gid_kind { infiniband, roce_v1, roce_v2 };

struct Gid_candidate {
    std::uint32_t index = 0;
    Gid_kind kind = Gid_kind::infiniband;
    std::array<std::uint8_t, 16> gid{};
};

// The GID index a RoCE port is addressed by: RoCE v2 (routable over UDP/IP)
// with an IPv4-mapped address first, as the farm's data networks are IPv4,
// then RoCE v2 with any other non-link-local address, then the same for
// RoCE v1. Nothing: the port has no usable GID.
std::optional<std::uint32_t> pick_gid_index(std::span<const Gid_candidate> candidates);

// The RC retry settings that give a peer up within `peer_timeout_ms`: the
// local ACK timeout is 4.096 us * 2^timeout and a send is retried
// retry_count times, so a dead or hung peer shows as a failed completion
// after (retry_count + 1) timeouts at most.
struct Qp_timeouts {
    std::uint8_t timeout = 0;      // exponent, 1..31
    std::uint8_t retry_count = 0;  // 0..7
};
Qp_timeouts qp_timeouts(std::uint32_t peer_timeout_ms);
// How long (in ms) a peer that acknowledges nothing takes to be given up.
double give_up_ms(const Qp_timeouts& timeouts);

// Why a peer is lost, from a work completion in error: no acknowledgement
// within the retries is a timeout; the peer's queue pair answering with an
// error (its process died and the kernel tore it down, or it refused the
// message) is the peer resetting the connection; anything else is an error.
Link_failure link_failure_of(ibv_wc_status status);

// What a unit tells a peer, over the TCP mesh, to connect its two queue
// pairs to it (the rc_pingpong "destination"): fixed-size, little endian.
struct Qp_address {
    static constexpr std::uint32_t magic_value = 0x50514245;  // "EBQP"
    // 2: a data send waits for its BU's credit, which version 1 never sends
    // (and would take for a control message): the two cannot be mixed.
    static constexpr std::uint16_t version_value = 2;

    std::uint32_t magic = magic_value;
    std::uint16_t version = version_value;
    std::uint16_t lid = 0;
    std::uint32_t rank = 0;  // the sender's
    std::uint32_t control_qpn = 0;
    std::uint32_t data_qpn = 0;
    std::uint32_t control_psn = 0;
    std::uint32_t data_psn = 0;
    std::array<std::uint8_t, 16> gid{};
    std::uint8_t has_gid = 0;     // RoCE, or InfiniBand across subnets
    std::uint8_t mtu = 0;         // enum ibv_mtu: 1 (256 B) .. 5 (4096 B)
    std::uint8_t link_layer = 0;  // 1 InfiniBand, 2 Ethernet
    std::uint8_t reserved = 0;
};
static_assert(sizeof(Qp_address) == 48);

// Why the address a peer sent cannot be used; nothing if it can. `rank` is
// the rank it came from, `link_layer` this unit's.
std::optional<std::string> check_qp_address(const Qp_address& address, std::uint32_t rank, std::uint8_t link_layer);

}  // namespace eb
