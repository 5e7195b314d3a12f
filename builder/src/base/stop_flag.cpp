#include "base/stop_flag.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace eb {
namespace {

static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");
static_assert(std::atomic<Stop_flag*>::is_always_lock_free, "the signal handler needs a lock-free pointer");

std::atomic<Stop_flag*> signal_target{nullptr};

extern "C" void on_stop_signal(int) {
    const int interrupted_errno = errno;  // the interrupted code may be about to read it
    if (Stop_flag* target = signal_target.load(); target != nullptr) target->request();
    errno = interrupted_errno;
}

}  // namespace

Stop_flag::Stop_flag() : event_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!event_) throw std::system_error(errno, std::generic_category(), "eventfd");
}

Stop_flag::~Stop_flag() {
    Stop_flag* self = this;
    if (signal_target.compare_exchange_strong(self, nullptr)) {
        ::signal(SIGTERM, SIG_DFL);
        ::signal(SIGINT, SIG_DFL);
    }
}

void Stop_flag::request() noexcept {
    requested_.store(true);
    // Nobody reads the counter, so the fd stays readable for every poller.
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(event_.get(), &one, sizeof one);
}

void Stop_flag::clear() noexcept {
    // The flag first: a request() from here on is kept, never overwritten.
    // One that comes before the drain has its write drained with the old
    // ones, so the fd is made readable again for it.
    requested_.store(false);
    std::uint64_t count = 0;
    [[maybe_unused]] const ssize_t read = ::read(event_.get(), &count, sizeof count);  // zeroes the counter
    if (requested_.load()) {
        const std::uint64_t one = 1;
        [[maybe_unused]] const ssize_t written = ::write(event_.get(), &one, sizeof one);
    }
}

bool Stop_flag::wait_for(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!requested()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd watch{.fd = event_.get(), .events = POLLIN, .revents = 0};
        ::poll(&watch, 1, static_cast<int>(left.count()));  // EINTR: just look again
    }
    return true;
}

void Stop_flag::wait() const {
    while (!wait_for(std::chrono::hours(1))) {
    }
}

void stop_on_signals(Stop_flag& stop) {
    signal_target.store(&stop);
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGTERM, &action, nullptr);
    ::sigaction(SIGINT, &action, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
}

}  // namespace eb
