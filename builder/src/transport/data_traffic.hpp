#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace eb {

// What a unit's data channel moved over the network, counted by the
// transport itself (bytes the sockets or the NIC really carried to and from
// other units; a unit's own MFP, copied locally, is not counted) and the
// time spent in wait_data moving them. The unit's successive transports
// (one per session) add to the same counters; telemetry reads them.
struct Data_traffic {
    std::atomic<std::uint64_t> bytes_sent{0};
    std::atomic<std::uint64_t> bytes_received{0};
    std::atomic<std::uint64_t> moving_ns{0};
    // MFP sends an RU held because their BU had not yet posted the receive
    // (over verbs, until its credit came; TCP holds none: the socket buffers
    // them), and how long they waited. Many on one RU: its BUs are late.
    std::atomic<std::uint64_t> sends_held{0};
    std::atomic<std::uint64_t> held_ns{0};
};

// Adds the time since `since` to the counter `ns`.
inline void add_time_since(std::atomic<std::uint64_t>& ns, std::chrono::steady_clock::time_point since) {
    ns.fetch_add(static_cast<std::uint64_t>(
                     std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count()),
                 std::memory_order_relaxed);
}

// Adds the time from its construction to its end to traffic.moving_ns
// (nothing for a null traffic).
class Moving_time {
public:
    explicit Moving_time(Data_traffic* traffic)
        : traffic_(traffic), began_(traffic ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}) {}
    ~Moving_time() {
        if (traffic_) add_time_since(traffic_->moving_ns, began_);
    }
    Moving_time(const Moving_time&) = delete;
    Moving_time& operator=(const Moving_time&) = delete;

private:
    Data_traffic* traffic_;
    std::chrono::steady_clock::time_point began_;
};

}  // namespace eb
