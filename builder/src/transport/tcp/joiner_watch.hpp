#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "base/rank.hpp"
#include "schedule/peer_address.hpp"
#include "transport/tcp/lost_peer_probe.hpp"

namespace eb {

// The units a pending rank table takes into the running set (a spare made
// live, a lost rank taken back), dialled before this unit votes to switch
// to it. At the switch the set stops building until its joiners connect,
// or for --join-timeout-ms when one cannot: a unit restarted on a server
// whose network is not up yet would cost the set that stall, fail, and
// wait out the operator's back-off. So a running unit votes for the table
// only once every joiner's data port answers (it listens from its
// configure), building on under its table meanwhile, or once `patience`
// has passed, when the switch goes as before.
class Joiner_watch {
public:
    Joiner_watch(std::uint64_t epoch, std::vector<Peer_address> peers, const std::set<Rank>& joiners, Rank self,
                 int peer_timeout_ms, std::chrono::milliseconds patience);

    std::uint64_t epoch() const { return epoch_; }
    // Every joiner reached, or patience spent.
    bool ready() const;

private:
    const std::uint64_t epoch_;
    const std::chrono::steady_clock::time_point give_up_at_;
    mutable std::mutex mutex_;
    std::set<Rank> waiting_;  // joiners not reached yet
    Lost_peer_probe probe_;   // last: its thread reports into the above
};

}  // namespace eb
