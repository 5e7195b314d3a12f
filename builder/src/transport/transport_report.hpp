#pragma once

#include <string>
#include <vector>

#include "base/rank.hpp"

namespace eb {

// What /status and /metrics show of a unit's transport.
struct Transport_report {
    struct Peer {
        Rank rank = 0;
        std::string qp_state;  // verbs: the queue pairs' state (RTS when connected)
    };
    std::string kind = "tcp";  // tcp or verbs
    // verbs only:
    std::string device;       // the RDMA device
    int port = 0;
    int gid_index = -1;       // -1: none (InfiniBand addressed by LID)
    std::string port_state;   // ACTIVE, DOWN, ...
    std::string link_layer;   // Ethernet (RoCE) or InfiniBand
    std::vector<Peer> peers;  // connected peers, by rank

    bool operator==(const Transport_report&) const = default;
};

}  // namespace eb
