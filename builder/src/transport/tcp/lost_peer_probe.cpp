#include "transport/tcp/lost_peer_probe.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <condition_variable>
#include <mutex>
#include <variant>

#include "base/fd.hpp"
#include "base/socket.hpp"

namespace eb {
namespace {

using Clock = std::chrono::steady_clock;

// One lost peer's dial.
struct Dial {
    Fd fd;
    bool connected = false;
    bool reached = false;  // as last reported
    Clock::time_point dialled{};
};

// Starts a non-blocking dial of `peer`; an empty Fd where it cannot even
// start (no such host, no descriptors): tried again at the next redial.
Fd dial(const Peer_address& peer, int peer_timeout_ms, const Resolver& resolve) {
    const Resolved resolved = resolve(peer.host);
    if (!std::holds_alternative<in_addr>(resolved)) return {};
    try {
        Fd fd = tcp_socket();
        tune_data_socket(fd.get(), peer_timeout_ms);  // keepalive and user timeout watch a dial that connected
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(peer.port);
        to.sin_addr = std::get<in_addr>(resolved);
        if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS)
            return {};
        return fd;
    } catch (const std::exception&) {
        return {};
    }
}

short events_now(const Fd& fd, short wanted) {
    pollfd entry{fd.get(), wanted, 0};
    return ::poll(&entry, 1, 0) == 1 ? entry.revents : short{0};
}

}  // namespace

Lost_peer_probe::Lost_peer_probe(std::vector<Peer_address> peers, Rank self, int peer_timeout_ms, Lost lost,
                                 Report report, Timing timing, Resolver resolve)
    : thread_([this, peers = std::move(peers), self, peer_timeout_ms, lost = std::move(lost),
               report = std::move(report), timing, resolve = std::move(resolve)](std::stop_token stop) mutable {
          run(stop, std::move(peers), self, peer_timeout_ms, std::move(lost), std::move(report), timing,
              std::move(resolve));
      }) {}

void Lost_peer_probe::run(std::stop_token stop, std::vector<Peer_address> peers, Rank self, int peer_timeout_ms,
                          Lost lost, Report report, Timing timing, Resolver resolve) {
    std::vector<Dial> dials(peers.size());
    auto set_reached = [&](Rank peer, bool reached) {
        if (dials[peer].reached == reached) return;
        dials[peer].reached = reached;
        report(peer, reached);
    };
    std::mutex mutex;
    std::condition_variable_any wake;  // only the stop wakes it early
    while (!stop.stop_requested()) {
        const Clock::time_point now = Clock::now();
        for (Rank peer = 0; peer < peers.size(); ++peer) {
            Dial& d = dials[peer];
            if (peer == self || !lost(peer)) {
                d.fd.reset();
                d.connected = false;
                d.reached = false;  // the unit's status forgets it with the loss
                continue;
            }
            if (d.fd && d.connected) {
                const short seen = events_now(d.fd, POLLIN | POLLRDHUP);
                if (seen == 0) continue;  // still up
                // The peer accepted it (its nonce came: it is there) or the
                // connection ended (closed, or the path failed: keepalive).
                const bool accepted = (seen & POLLIN) != 0 && (seen & (POLLERR | POLLHUP | POLLRDHUP)) == 0;
                // Read what it sent, so the close is a plain FIN (unread data
                // would make it a reset): the peer drops it as a dialler that
                // gave up.
                std::array<std::byte, 64> sink;
                while (::recv(d.fd.get(), sink.data(), sink.size(), MSG_DONTWAIT) > 0) {
                }
                d.fd.reset();
                d.connected = false;
                if (accepted) d.dialled = now;  // dialled again after `redial`: it may accept on (connecting)
                else set_reached(peer, false);
            } else if (d.fd) {
                const short seen = events_now(d.fd, POLLOUT);
                int error = 0;
                socklen_t size = sizeof error;
                if (seen != 0 && ::getsockopt(d.fd.get(), SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0) {
                    d.connected = true;
                    set_reached(peer, true);
                    continue;
                }
                if (seen == 0 && now - d.dialled < timing.redial) continue;  // still dialling
                d.fd.reset();  // refused, unreachable, or no answer in time (it never reached the backlog)
                set_reached(peer, false);
            }
            if (now - d.dialled < timing.redial) continue;
            d.dialled = now;
            d.fd = dial(peers[peer], peer_timeout_ms, resolve);
        }
        std::unique_lock lock(mutex);
        wake.wait_for(lock, stop, timing.tick, [] { return false; });
    }
}

}  // namespace eb
