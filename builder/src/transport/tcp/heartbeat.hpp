#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/fd.hpp"
#include "base/rank.hpp"
#include "base/socket.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace eb {

// How long a peer waited for may be silent before it is lost. A peer not
// heard from since it connected gets longer: its process may still be
// connecting to others (a joiner waits up to the join timeout) before it
// beats.
struct Liveness {
    std::chrono::milliseconds peer_timeout{default_peer_timeout_ms};
    std::chrono::milliseconds first_sign_timeout{std::chrono::milliseconds(default_peer_timeout_ms) +
                                                 default_join_timeout};
};

// Signs of life between the processes of a mesh. A peer process that is
// stopped (SIGSTOP), hung or swapped out keeps its TCP connections up, since
// its kernel still acknowledges, so only a sign from the process itself
// tells it is there. A thread of its own sends one byte every `interval` to
// each watched peer and notes when each peer's bytes last arrived; the
// transport loses a peer it waits for that has been silent for the peer
// timeout. The bytes ride the reverse direction of the data connections
// (this unit's incoming connection from a peer carries its beats to that
// peer; its outgoing one brings the peer's), which the data path never uses
// after the hellos, so no port, address or authentication of its own is
// needed and a cut link stops the beats with the data.
class Heartbeat {
public:
    using Clock = std::chrono::steady_clock;

    Heartbeat(Rank units, Clock::duration interval);
    ~Heartbeat();  // stops the thread and closes its copies of the connections
    Heartbeat(const Heartbeat&) = delete;
    Heartbeat& operator=(const Heartbeat&) = delete;

    // Beats with `peer` over copies of its connections (the caller keeps and
    // closes its own); heard counts from now.
    void watch(Rank peer, int to_fd, int from_fd);
    // Stops beating with `peer` and drops the copies.
    void forget(Rank peer);
    // Notes a sign of life that came another way (data received from it).
    void heard(Rank peer, Clock::time_point when);
    // When `peer`'s last sign of life came, or when watching it began; and
    // whether any has come yet.
    Clock::time_point last_heard(Rank peer) const;
    bool heard_yet(Rank peer) const;
    Clock::duration interval() const { return interval_; }

private:
    struct Link {
        Fd to;    // outgoing connection: the peer's beats come back on it
        Fd from;  // incoming connection: this unit's beats go back on it
        bool to_open = false;  // its reverse direction is still read
        std::uint64_t generation = 0;
    };
    void run(std::stop_token stop);
    void wake();

    Clock::duration interval_;
    std::vector<std::atomic<Clock::rep>> heard_;  // by rank: time_since_epoch of the last byte
    std::vector<std::atomic<bool>> heard_yet_;
    Fd wakeup_;  // eventfd: links changed, or stop

    std::mutex mutex_;  // guards what follows
    std::vector<Link> links_;
    std::vector<Fd> retired_;  // closed by the thread, never under a poll() of its own
    std::uint64_t generations_ = 0;

    std::jthread thread_;  // last: started once the rest is
};

}  // namespace eb
