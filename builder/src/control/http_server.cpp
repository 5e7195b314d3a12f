#include "http_server.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <string>
#include <system_error>

#include "http.hpp"
#include "log.hpp"
#include "socket.hpp"

namespace eb {
namespace {

using Clock = std::chrono::steady_clock;

// A client gets this long to send its request head and to take the answer,
// so one stuck client delays the others by at most that; a request with a
// body (a configure's rank table, up to 4 MiB) gets longer.
constexpr auto head_timeout = std::chrono::milliseconds(500);
constexpr auto body_timeout = std::chrono::seconds(2);

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

// Sends all of `bytes`; false if the client went away, stalled or stop came.
bool send_all(int fd, std::string_view bytes, const Stop_flag& stop, Clock::time_point deadline) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<std::size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_ready(fd, POLLOUT, stop, deadline)) return false;
        } else {
            return false;
        }
    }
    return true;
}

// After an answer sent before the whole request was read (413, say): closing
// with unread bytes would reset the connection and could destroy the answer
// before the client reads it, so read on until the client closes or time is up.
void drain(int fd, const Stop_flag& stop, Clock::time_point deadline) {
    ::shutdown(fd, SHUT_WR);
    char chunk[4096];
    while (wait_ready(fd, POLLIN, stop, deadline)) {
        const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return;
    }
}

}  // namespace

Http_server::Http_server(std::uint16_t port, Control_target& target, const Control_token& token,
                         const Stop_flag& stop)
    : listener_(tcp_socket()), target_(target), token_(token), stop_(stop) {
    bind_and_listen(listener_.get(), port, "--http-port");
}

std::uint16_t Http_server::port() const {
    sockaddr_in address{};
    socklen_t size = sizeof address;
    if (::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&address), &size) != 0)
        throw std::system_error(errno, std::generic_category(), "getsockname of the --http-port listener");
    return ntohs(address.sin_port);
}

void Http_server::serve() {
    while (true) {
        pollfd watch[2] = {{listener_.get(), POLLIN, 0}, {stop_.fd(), POLLIN, 0}};
        if (::poll(watch, 2, -1) < 0 && errno != EINTR) {
            log_error("control API server stopped: poll: ", error_text(errno));
            return;
        }
        if (watch[1].revents != 0) return;
        if (watch[0].revents == 0) continue;
        Fd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (client) answer(std::move(client));  // failed accepts (client gone) need no action
    }
}

void Http_server::answer(Fd client) {
    const auto start = Clock::now();
    auto deadline = start + head_timeout;
    std::string received;
    Http_parse parse;
    bool continue_sent = false;
    while (true) {
        parse = parse_request(received);
        if (parse.kind != Http_parse::Kind::incomplete) break;
        if (parse.head_complete) deadline = start + body_timeout;
        // curl waits a second for this before sending a body over 1 KiB.
        if (parse.expects_continue && !continue_sent) {
            if (!send_all(client.get(), "HTTP/1.1 100 Continue\r\n\r\n", stop_, deadline)) return;
            continue_sent = true;
        }
        if (!wait_ready(client.get(), POLLIN, stop_, deadline)) return;
        char chunk[65536];
        const ssize_t got = ::recv(client.get(), chunk, sizeof chunk, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return;
        if (got > 0) received.append(chunk, static_cast<std::size_t>(got));
    }

    if (parse.kind == Http_parse::Kind::failed) {
        if (send_all(client.get(), serialize(parse.error, false), stop_, deadline))
            drain(client.get(), stop_, deadline);
        return;
    }
    const Http_request& request = parse.request;
    Http_response response;
    try {
        response = handle_request(request, token_, target_);
    } catch (const std::exception& error) {
        // The unit's failure to answer one request must not end the server.
        log_error("control API: ", request.method, " ", request.path, ": ", error.what());
        response = error_response(500, std::string(request.method) + " " + std::string(request.path) + ": " +
                                           error.what());
    }
    // Commands are rare and change the unit: each leaves a line in the log.
    if (request.method == "POST") {
        std::string_view detail = response.status == 200 ? std::string_view() : std::string_view(response.body);
        if (detail.ends_with('\n')) detail.remove_suffix(1);
        log_info("control API: POST ", request.path, ": ", response.status, detail.empty() ? "" : " ", detail);
    }
    send_all(client.get(), serialize(response, request.method == "HEAD"), stop_, deadline);
}

}  // namespace eb
