#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/fd.hpp"
#include "base/stop_flag.hpp"
#include "test_support.hpp"

namespace eb::test {

// A TCP relay on 127.0.0.1 to a unit's data port: the data network between
// that unit and those that dial it through the relay. cut() ends every
// connection it carries, as that network going down would, and it relays
// new ones again afterwards. black_hole() and corrupt() act on one way only:
// forth carries what the dialler sends, back what the unit dialled sends.
class Relay {
public:
    enum class Way { forth, back };

    explicit Relay(std::uint16_t target) : target_(target), port_(free_ports(1)[0]) {
        listener_ = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        const int one = 1;
        ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        const sockaddr_in address = loopback(port_);
        if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(listener_.get(), 64) != 0)
            throw std::runtime_error("relay: cannot listen on port " + std::to_string(port_));
        thread_ = std::jthread([this] { run(); });
    }
    ~Relay() { stop_.request(); }

    std::uint16_t port() const { return port_; }
    // From now on, what it carries that way is read and dropped: a link that
    // loses everything one way while the other way works.
    void black_hole(Way way) {
        std::lock_guard lock(mutex_);
        ways_[static_cast<int>(way)].black_hole = true;
    }
    // From now on, one byte in every `every` it carries that way is changed.
    void corrupt(Way way, std::size_t every) {
        std::lock_guard lock(mutex_);
        ways_[static_cast<int>(way)].corrupt_every = every;
    }
    std::uint64_t bytes_corrupted() const {
        std::lock_guard lock(mutex_);
        return ways_[0].corrupted + ways_[1].corrupted;
    }
    void cut() {
        std::lock_guard lock(mutex_);
        for (const auto& [a, b] : pairs_) {
            ::shutdown(a.get(), SHUT_RDWR);
            ::shutdown(b.get(), SHUT_RDWR);
        }
    }

private:
    static sockaddr_in loopback(std::uint16_t port) {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(port);
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return address;
    }

    void run() {
        while (!stop_.requested()) {
            std::vector<pollfd> watch{{stop_.fd(), POLLIN, 0}, {listener_.get(), POLLIN, 0}};
            for (const auto& [a, b] : pairs_) watch.insert(watch.end(), {{a.get(), POLLIN, 0}, {b.get(), POLLIN, 0}});
            if (::poll(watch.data(), watch.size(), -1) < 0) continue;  // EINTR
            std::vector<bool> ended(pairs_.size());
            for (std::size_t pair = 0; pair < pairs_.size(); ++pair)
                for (const bool forth : {true, false})
                    if (watch[2 + 2 * pair + (forth ? 0 : 1)].revents != 0 && !ended[pair])
                        ended[pair] = !pump(forth ? pairs_[pair].first : pairs_[pair].second,
                                            forth ? pairs_[pair].second : pairs_[pair].first, ways_[forth ? 0 : 1]);
            std::lock_guard lock(mutex_);
            for (std::size_t pair = pairs_.size(); pair-- > 0;)
                if (ended[pair]) pairs_.erase(pairs_.begin() + static_cast<std::ptrdiff_t>(pair));
            if (watch[1].revents != 0) accept_one();
        }
    }

    struct Way_state {
        bool black_hole = false;
        std::size_t corrupt_every = 0;  // 0: none
        std::uint64_t carried = 0, corrupted = 0;
    };

    // Moves what `from` has to `to` (as `way` says); false once either side is done.
    bool pump(const Fd& from, const Fd& to, Way_state& way) {
        char buffer[65536];
        const ssize_t n = ::read(from.get(), buffer, sizeof buffer);
        {
            std::lock_guard lock(mutex_);
            if (n > 0 && way.black_hole) return true;
            for (ssize_t i = 0; n > 0 && i < n; ++i)
                if (way.corrupt_every != 0 && ++way.carried % way.corrupt_every == 0) {
                    buffer[i] = static_cast<char>(buffer[i] ^ 0x5a);
                    ++way.corrupted;
                }
        }
        for (ssize_t sent = 0; n > 0 && sent < n;) {
            const ssize_t m = ::send(to.get(), buffer + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
            if (m <= 0) return false;
            sent += m;
        }
        return n > 0;
    }

    void accept_one() {  // mutex held
        Fd accepted(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        Fd dialled(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        const sockaddr_in address = loopback(target_);
        if (accepted && ::connect(dialled.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0)
            pairs_.emplace_back(std::move(accepted), std::move(dialled));
    }

    const std::uint16_t target_, port_;
    Fd listener_;
    Stop_flag stop_;
    mutable std::mutex mutex_;  // guards pairs_ against cut() (only the relay's thread changes it), and ways_
    std::vector<std::pair<Fd, Fd>> pairs_;
    Way_state ways_[2];  // forth, back
    std::jthread thread_;  // last: stopped before the rest goes
};

}  // namespace eb::test
