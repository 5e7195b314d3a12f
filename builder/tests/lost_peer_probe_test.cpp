#include "transport/tcp/lost_peer_probe.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "base/socket.hpp"
#include "test_support.hpp"

namespace eb {
namespace {

using namespace std::chrono_literals;

constexpr Lost_peer_probe::Timing fast{20ms, 100ms};
constexpr auto deadline = 10s;

// What a probe reported, as the unit's status keeps it, and which ranks
// count as lost; a test waits on its reports, never on time.
class Watch {
public:
    explicit Watch(std::set<Rank> lost) : lost_(std::move(lost)) {}

    Lost_peer_probe::Lost lost() {
        return [this](Rank peer) {
            std::lock_guard lock(mutex_);
            return lost_.contains(peer);
        };
    }
    Lost_peer_probe::Report report() {
        return [this](Rank peer, bool reached) {
            std::lock_guard lock(mutex_);
            reached_[peer] = reached;
            reports_.push_back({peer, reached});
            changed_.notify_all();
        };
    }
    bool wait_reached(Rank peer, bool reached) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, deadline, [&] { return reached_.contains(peer) && reached_[peer] == reached; });
    }
    void set_lost(Rank peer, bool lost) {
        std::lock_guard lock(mutex_);
        if (lost) lost_.insert(peer);
        else lost_.erase(peer);
    }
    std::vector<std::pair<Rank, bool>> reports() {
        std::lock_guard lock(mutex_);
        return reports_;
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::set<Rank> lost_;
    std::map<Rank, bool> reached_;
    std::vector<std::pair<Rank, bool>> reports_;
};

// A connection waiting in `listener`'s backlog, accepted within the deadline.
Fd accept_within_deadline(const Fd& listener) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < until) {
        if (Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC)); fd) return fd;
        pollfd entry{listener.get(), POLLIN, 0};
        ::poll(&entry, 1, 100);
    }
    return {};
}

std::size_t backlog(const Fd& listener) {
    std::size_t waiting = 0;
    // The listener does not block: accept ends where the backlog does.
    while (Fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC))) ++waiting;
    return waiting;
}

// Rank 0 is the probing unit; rank 1 a peer it lost, whose data port
// listens (a running unit, building: it accepts only at its next switch);
// rank 2 a lost peer whose port nobody listens on (its process gone);
// rank 3 a peer not lost.
struct Peers {
    std::vector<std::uint16_t> ports = test::free_ports(4);
    Fd listening = listen_for_peers(ports[1]);
    Fd up = listen_for_peers(ports[3]);
    std::vector<Peer_address> addresses{{"127.0.0.1", ports[0]}, {"127.0.0.1", ports[1]}, {"127.0.0.1", ports[2]},
                                        {"127.0.0.1", ports[3]}};
};

TEST(LostPeerProbe, ReportsALostPeerWhoseDataPortAnswersAndNoOther) {
    Peers peers;
    Watch watch({1, 2});
    {
        const Lost_peer_probe probe(peers.addresses, 0, 1000, watch.lost(), watch.report(), fast);
        ASSERT_TRUE(watch.wait_reached(1, true)) << "the lost peer whose port listens was never reported reached";
    }
    for (const auto& [peer, reached] : watch.reports())
        EXPECT_EQ(peer, 1) << "reported rank " << peer << (reached ? " reached" : " not reached")
                           << ": rank 2 listens nowhere, rank 3 is not lost";
    // One connection kept, not one per dial: the peer's backlog holds the
    // probe once however long it stays lost.
    EXPECT_EQ(backlog(peers.listening), 1u);
    EXPECT_EQ(backlog(peers.up), 0u) << "a peer not lost was dialled";
}

TEST(LostPeerProbe, APeerThatAcceptsTheProbeStaysReachedAndTheProbeClosesSilently) {
    Peers peers;
    Watch watch({1});
    const Lost_peer_probe probe(peers.addresses, 0, 1000, watch.lost(), watch.report(), fast);
    ASSERT_TRUE(watch.wait_reached(1, true));
    // The peer switches tables and accepts: it sends its nonce first, as
    // the mesh does; the probe closes without a word (no hello: no join).
    const Fd accepted = accept_within_deadline(peers.listening);
    ASSERT_TRUE(accepted);
    const char nonce[16] = {};
    ASSERT_EQ(::send(accepted.get(), nonce, sizeof nonce, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof nonce));
    pollfd entry{accepted.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&entry, 1, static_cast<int>(std::chrono::milliseconds(deadline).count())), 1);
    char got = 0;
    EXPECT_EQ(::recv(accepted.get(), &got, 1, 0), 0) << "the probe sent bytes: the peer would read them as a hello";
    // ... and dials again, still reaching it, never reporting it lost.
    ASSERT_TRUE(accept_within_deadline(peers.listening)) << "no new dial after the peer accepted the first";
    for (const auto& [peer, reached] : watch.reports()) EXPECT_TRUE(reached) << "rank " << peer << " reported not reached";
}

TEST(LostPeerProbe, APeerWhosePortClosesIsNoLongerReached) {
    Peers peers;
    Watch watch({1});
    const Lost_peer_probe probe(peers.addresses, 0, 1000, watch.lost(), watch.report(), fast);
    ASSERT_TRUE(watch.wait_reached(1, true));
    peers.listening.reset();  // its process ends: the backlog's connections are reset
    EXPECT_TRUE(watch.wait_reached(1, false)) << "the probe's connection was reset, still reported reached";
}

TEST(LostPeerProbe, APeerNoLongerLostIsLetGo) {
    Peers peers;
    Watch watch({1});
    const Lost_peer_probe probe(peers.addresses, 0, 1000, watch.lost(), watch.report(), fast);
    ASSERT_TRUE(watch.wait_reached(1, true));
    watch.set_lost(1, false);  // it rejoined
    const Fd accepted = accept_within_deadline(peers.listening);
    ASSERT_TRUE(accepted);
    pollfd entry{accepted.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&entry, 1, static_cast<int>(std::chrono::milliseconds(deadline).count())), 1)
        << "the probe kept its connection to a peer no longer lost";
}

}  // namespace
}  // namespace eb
