#include "http_server.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "http.hpp"
#include "log.hpp"
#include "socket.hpp"

namespace eb {
namespace {

using Clock = std::chrono::steady_clock;

// A client gets this long to send its request head and to take the answer,
// so one stuck client delays the others by at most that.
constexpr auto client_timeout = std::chrono::milliseconds(500);
constexpr std::size_t max_request_head = 8192;

// Waits for `events` on `fd` or for stop; false on stop or timeout.
bool wait_ready(int fd, short events, const Stop_flag& stop, Clock::time_point deadline) {
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        pollfd watch[2] = {{fd, events, 0}, {stop.fd(), POLLIN, 0}};
        const int ready = ::poll(watch, 2, static_cast<int>(left.count()));
        if (ready < 0 && errno != EINTR) return false;
        if (watch[1].revents != 0) return false;
        if (watch[0].revents != 0) return true;
    }
}

}  // namespace

Http_server::Http_server(std::uint16_t port, const Unit_status& status, const Stop_flag& stop)
    : listener_(tcp_socket()), status_(status), stop_(stop) {
    bind_and_listen(listener_.get(), port, "--http-port");
}

void Http_server::serve() {
    while (true) {
        pollfd watch[2] = {{listener_.get(), POLLIN, 0}, {stop_.fd(), POLLIN, 0}};
        if (::poll(watch, 2, -1) < 0 && errno != EINTR) {
            log_error("status server stopped: poll: ", error_text(errno));
            return;
        }
        if (watch[1].revents != 0) return;
        if (watch[0].revents == 0) continue;
        Fd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (client) answer(std::move(client));  // failed accepts (client gone) need no action
    }
}

void Http_server::answer(Fd client) {
    const auto deadline = Clock::now() + client_timeout;
    std::string head;
    while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
        if (head.size() >= max_request_head || !wait_ready(client.get(), POLLIN, stop_, deadline)) return;
        char chunk[1024];
        const ssize_t got = ::recv(client.get(), chunk, sizeof chunk, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return;
        if (got > 0) head.append(chunk, static_cast<std::size_t>(got));
    }

    const auto request = parse_request_head(head);
    const std::string reply = request ? serialize(respond(*request, status_.snapshot()), request->method == "HEAD")
                                      : serialize(bad_request(), false);
    std::size_t sent = 0;
    while (sent < reply.size()) {
        const ssize_t n = ::send(client.get(), reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<std::size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_ready(client.get(), POLLOUT, stop_, deadline)) return;
        } else {
            return;
        }
    }
}

}  // namespace eb
