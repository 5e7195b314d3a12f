#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace eb {

// Measured with make bench (4 units, 2 cores): 50 us left a tenth of the
// cores idle; 300 moved the most, with or without every event checked; 500
// no more.
inline constexpr std::uint32_t default_busy_poll_us = 300;

// How long a thread that waits on the network keeps looking before it
// sleeps (--busy-poll-us; Linux's net.core.busy_poll is the same idea for
// its own sockets). A sleep in poll() and the wake-up that ends it cost tens
// of microseconds, more in a VM, where an idle virtual CPU halts. A cycle
// waits many times for a few hundred microseconds each (a phase's MFPs, the
// cycle's control rounds): sleeping through each left a fifth of this
// machine's two cores idle while four units moved data
// (builder/docs/benchmarks.md). Between looks the core goes to any other thread that can
// run on it, so polling only takes time nobody else wanted.
class Busy_poll {
public:
    using Clock = std::chrono::steady_clock;

    explicit Busy_poll(std::chrono::microseconds window) : window_(window) {}

    // Calls `ready` until it returns true (then returns true) or the window
    // is over (false). A zero window returns false at once.
    template <typename Ready>
    bool poll(Ready ready) const {
        if (window_.count() <= 0) return false;
        const Clock::time_point end = Clock::now() + window_;
        do {
            if (ready()) return true;
            std::this_thread::yield();
        } while (Clock::now() < end);
        return false;
    }

private:
    std::chrono::microseconds window_;
};

}  // namespace eb
