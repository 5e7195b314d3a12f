#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/busy_poll.hpp"
#include "transport/injected_fault.hpp"

namespace eb {

enum class Transport_kind { tcp, verbs };
std::string_view transport_kind_name(Transport_kind kind);

// How a unit's transport moves data and watches its peers (the --transport
// flags).
struct Transport_settings {
    Transport_kind kind = Transport_kind::tcp;
    std::string rdma_device;  // verbs: empty means the only device there is
    int gid_index = -1;       // verbs, RoCE: < 0 picks one
    std::uint32_t peer_timeout_ms = 1000;
    std::uint32_t setup_timeout_ms = 5000;
    std::uint32_t busy_poll_us = default_busy_poll_us;  // looking for data before sleeping (Busy_poll)
    unsigned tcp_streams = 1;  // data connections per peer and direction (--tcp-streams)
    std::optional<Injected_fault> fault;  // verbs: --inject-fault
};

// Whether this build has the verbs transport (libibverbs found at build time).
bool verbs_available();

}  // namespace eb
