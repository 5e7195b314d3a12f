#include "transport/tcp/heartbeat.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#include "base/log.hpp"
#include "base/socket.hpp"
#include "transport/transport.hpp"

namespace eb {
namespace {

constexpr char beat = 'H';

Fd copy_of(int fd) {
    Fd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (!copy) throw Transport_error("heartbeat: cannot copy a data connection: " + error_text(errno));
    return copy;
}

}  // namespace

Heartbeat::Heartbeat(Rank units, Clock::duration interval)
    : interval_(interval),
      heard_(units),
      heard_yet_(units),
      wakeup_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      links_(units) {
    if (!wakeup_) throw Transport_error("heartbeat: eventfd: " + error_text(errno));
    thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

Heartbeat::~Heartbeat() {
    thread_.request_stop();
    wake();  // the thread then leaves its poll(); the jthread joins it
}

void Heartbeat::wake() {
    const std::uint64_t one = 1;
    (void)!::write(wakeup_.get(), &one, sizeof one);  // a counter already set wakes it as well
}

void Heartbeat::watch(Rank peer, int to_fd, int from_fd) {
    Fd to = copy_of(to_fd), from = copy_of(from_fd);
    heard_[peer].store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    heard_yet_[peer].store(false, std::memory_order_relaxed);
    {
        std::lock_guard lock(mutex_);
        Link& link = links_[peer];
        retired_.push_back(std::move(link.to));
        retired_.push_back(std::move(link.from));
        link = {std::move(to), std::move(from), true, ++generations_};
    }
    wake();
}

void Heartbeat::forget(Rank peer) {
    {
        std::lock_guard lock(mutex_);
        Link& link = links_[peer];
        if (!link.to && !link.from) return;
        retired_.push_back(std::move(link.to));
        retired_.push_back(std::move(link.from));
        link = {};
    }
    wake();
}

void Heartbeat::heard(Rank peer, Clock::time_point when) {
    heard_[peer].store(when.time_since_epoch().count(), std::memory_order_relaxed);
    heard_yet_[peer].store(true, std::memory_order_relaxed);
}

Heartbeat::Clock::time_point Heartbeat::last_heard(Rank peer) const {
    return Clock::time_point(Clock::duration(heard_[peer].load(std::memory_order_relaxed)));
}

bool Heartbeat::heard_yet(Rank peer) const { return heard_yet_[peer].load(std::memory_order_relaxed); }

void Heartbeat::run(std::stop_token stop) {
    std::vector<pollfd> watched;
    std::vector<std::pair<Rank, std::uint64_t>> owners;  // of watched[1..]: peer and link generation
    Clock::time_point next_beat = Clock::now();
    while (!stop.stop_requested()) {
        watched.assign(1, {wakeup_.get(), POLLIN, 0});
        owners.clear();
        Clock::time_point now = Clock::now();
        {
            std::lock_guard lock(mutex_);
            retired_.clear();  // here, where no poll() of this thread holds them
            const bool beating = now >= next_beat;
            if (beating) next_beat = now + interval_;
            for (Rank peer = 0; peer < links_.size(); ++peer) {
                const Link& link = links_[peer];
                // A full buffer (the peer not reading) or a broken connection
                // is the data path's to see; a beat is never waited for.
                if (beating && link.from) (void)::send(link.from.get(), &beat, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (link.to && link.to_open) {
                    watched.push_back({link.to.get(), POLLIN, 0});
                    owners.emplace_back(peer, link.generation);
                }
            }
        }
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_beat - now).count();
        if (::poll(watched.data(), watched.size(), static_cast<int>(std::max<long>(wait, 0))) < 0) {
            if (errno != EINTR) log_warning("heartbeat: poll: ", error_text(errno));
            continue;
        }
        if (watched[0].revents != 0) {
            std::uint64_t count = 0;
            (void)!::read(wakeup_.get(), &count, sizeof count);
        }
        now = Clock::now();
        std::lock_guard lock(mutex_);
        for (std::size_t at = 1; at < watched.size(); ++at) {
            if (watched[at].revents == 0) continue;
            const auto [peer, generation] = owners[at - 1];
            Link& link = links_[peer];
            if (link.generation != generation || !link.to) continue;  // replaced meanwhile
            char received[64];
            const ssize_t got = ::recv(link.to.get(), received, sizeof received, MSG_DONTWAIT);
            if (got > 0) heard(peer, now);
            else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
                link.to_open = false;  // closed: the data path finds out when it needs the peer
            }
        }
    }
}

}  // namespace eb
