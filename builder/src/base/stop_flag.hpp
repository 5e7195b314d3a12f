#pragma once

#include <atomic>
#include <chrono>
#include <stdexcept>

#include "base/fd.hpp"

namespace eb {

// Wait loops end with this when the process is asked to stop.
class Stopped : public std::runtime_error {
public:
    Stopped() : std::runtime_error("stopped") {}
};

// "Stop now", set by SIGTERM/SIGINT, when the run is over or when a unit's
// session ends. Besides the flag it offers a file descriptor that turns
// readable on stop and stays so; blocking loops add it to their poll() set to
// wake at once.
class Stop_flag {
public:
    Stop_flag();
    // Detaches the signal handler from this flag first, if it was routed here.
    ~Stop_flag();
    Stop_flag(const Stop_flag&) = delete;
    Stop_flag& operator=(const Stop_flag&) = delete;

    // Async-signal-safe.
    void request() noexcept;
    bool requested() const noexcept { return requested_.load(); }
    // Re-arms the flag for the next session; only while nothing waits on it.
    // A request() that sets the flag once clear() has begun is kept (flag
    // set, fd readable). One that set it before is cleared with the rest;
    // should its write to the fd come after the drain, the fd stays readable
    // with the flag clear (pollers that wake find no stop).
    void clear() noexcept;
    int fd() const noexcept { return event_.get(); }

    // Waits up to `timeout` for a stop; true if it came.
    bool wait_for(std::chrono::milliseconds timeout) const;
    void wait() const;

private:
    Fd event_;
    std::atomic<bool> requested_{false};
};

// Routes SIGTERM and SIGINT to stop.request(), and ignores SIGPIPE (a peer
// going away shows up as an error on the socket instead). `stop` must outlive
// the process's use of signals; its destructor restores the default action.
void stop_on_signals(Stop_flag& stop);

}  // namespace eb
