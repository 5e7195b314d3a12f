#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "base/rank.hpp"
#include "schedule/peer_address.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace eb {

// Dials the data port of each peer this unit has lost, on a thread of its
// own, and says which of them it reaches again: a partition healed, a
// paused server resumed. The operator rejoins a unit that still runs its
// session only once it reaches the peers it lost (runplan.Rejoins), not
// into a set it cannot reach, each failed rejoin costing the set a join
// timeout; so the rejoin follows the heal within a poll, with no back-off.
//
// A dial is a TCP handshake and nothing more: no hello, so the peer never
// takes it for a join. One that connects is kept open and watched (TCP
// keepalive and --peer-timeout-ms, as data connections), so a peer reached
// again is not dialled again and holds one entry of this unit in its
// listener's backlog; when the peer next accepts (a switch), it sends its
// nonce, the probe closes, and the peer drops the connection silently, as
// a dialler that gave up. One that does not connect within `redial` is
// closed (it never reached the peer's backlog) and dialled afresh, so a
// path that comes back is seen within `redial`. With TCP the data port
// is the data path; with verbs it is the path the queue pairs are set up
// over, the nearest thing to the RDMA path a socket can test.
class Lost_peer_probe {
public:
    using Lost = std::function<bool(Rank)>;                 // whether the unit has lost the peer now
    using Report = std::function<void(Rank, bool reached)>;  // a lost peer reached, or no longer

    struct Timing {
        std::chrono::milliseconds tick{200};     // how often lost peers and dials are looked at
        std::chrono::milliseconds redial{1000};  // a dial not connected by then starts over
    };

    // Probes the ranks of `peers` (the table's addresses; `self` is this
    // unit) for which lost() says true, until destroyed. Host names are
    // resolved with `resolve` on the probe's thread.
    Lost_peer_probe(std::vector<Peer_address> peers, Rank self, int peer_timeout_ms, Lost lost, Report report,
                    Timing timing, Resolver resolve = resolve_host);
    Lost_peer_probe(std::vector<Peer_address> peers, Rank self, int peer_timeout_ms, Lost lost, Report report)
        : Lost_peer_probe(std::move(peers), self, peer_timeout_ms, std::move(lost), std::move(report), Timing{}) {}

private:
    void run(std::stop_token stop, std::vector<Peer_address> peers, Rank self, int peer_timeout_ms, Lost lost,
             Report report, Timing timing, Resolver resolve);

    std::jthread thread_;
};

}  // namespace eb
