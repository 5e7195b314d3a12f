#include "control/http_server.hpp"

#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>

#include "control/http.hpp"
#include "base/log.hpp"
#include "base/socket.hpp"

namespace eb {
namespace {

using Clock = std::chrono::steady_clock;

// Worker threads, each with its own poll() loop: a command that waits for the
// unit (a configure parsing a large table) leaves the other free for probes.
// poll(), not epoll: libmicrohttpd 0.9.75's edge-triggered epoll misses a
// client's close that arrives together with part of a request, and holds
// that slot for the idle timeout, so a client that connects, sends a few
// bytes and leaves, over and over, fills every slot and starves the probes.
constexpr unsigned worker_threads = 2;
// Request line and headers must fit in this much of a connection's memory;
// a longer head is answered 431 by libmicrohttpd.
constexpr std::size_t connection_memory = 16 << 10;
// A body (a configure's rank table, up to 4 MiB) must arrive within this
// time of the head: slow senders do not hold a connection for long.
constexpr auto body_timeout = std::chrono::seconds(2);

// One request being received: its body so far.
struct Request_state {
    Clock::time_point head_at = Clock::now();
    std::string body;
    bool refused = false;  // an answer is queued before the whole body came
};

MHD_Result queue(MHD_Connection* connection, const Http_response& response) {
    MHD_Response* reply = MHD_create_response_from_buffer(response.body.size(), const_cast<char*>(response.body.data()),
                                                          MHD_RESPMEM_MUST_COPY);
    if (reply == nullptr) return MHD_NO;
    MHD_add_response_header(reply, MHD_HTTP_HEADER_CONTENT_TYPE, response.content_type.c_str());
    for (const auto& [name, value] : response.headers) MHD_add_response_header(reply, name.c_str(), value.c_str());
    const MHD_Result queued = MHD_queue_response(connection, static_cast<unsigned>(response.status), reply);
    MHD_destroy_response(reply);
    return queued;
}

MHD_Result collect_header(void* headers, MHD_ValueKind, const char* name, const char* value) {
    static_cast<std::vector<Http_header>*>(headers)->push_back({name, value != nullptr ? value : ""});
    return MHD_YES;
}

void forget_request(void*, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
    delete static_cast<Request_state*>(*state);
    *state = nullptr;
}

}  // namespace

// Called by libmicrohttpd for each request: once when its head is in, then
// for each piece of its body, then once more to answer.
struct Http_server::Context {
    static MHD_Result on_request(void* server_pointer, MHD_Connection* connection, const char* url, const char* method,
                                 const char*, const char* upload, std::size_t* upload_size, void** state_pointer) {
        auto& server = *static_cast<Http_server*>(server_pointer);
        auto* state = static_cast<Request_state*>(*state_pointer);
        if (state == nullptr) {  // the head is in
            state = new Request_state;
            *state_pointer = state;
            const char* length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
            if (length != nullptr && std::strtoull(length, nullptr, 10) > max_request_body) {
                state->refused = true;  // before the body: curl then does not send it
                return queue(connection, too_large(length));
            }
            return MHD_YES;
        }
        if (*upload_size != 0) {  // a piece of the body
            if (state->refused) {
                *upload_size = 0;  // read and dropped
                return MHD_YES;
            }
            if (state->body.size() + *upload_size > max_request_body || Clock::now() - state->head_at > body_timeout) {
                state->refused = true;
                *upload_size = 0;
                return queue(connection, state->body.size() + *upload_size > max_request_body
                                             ? too_large(std::to_string(state->body.size() + *upload_size) + "+")
                                             : error_response(408, "the request body did not arrive within 2 s"));
            }
            state->body.append(upload, *upload_size);
            *upload_size = 0;
            return MHD_YES;
        }
        if (state->refused) return MHD_YES;
        return queue(connection, server.answer(connection, method, url, state->body));
    }

    static Http_response too_large(std::string_view length) {
        return error_response(413, "request body of " + std::string(length) + " bytes is over the limit of " +
                                       std::to_string(max_request_body) + " bytes (4 MiB)");
    }
};

Http_server::Http_server(std::uint16_t port, Control_target& target, const Control_token& token,
                         const Stop_flag& stop)
    : listener_(tcp_socket()), port_(port), target_(target), token_(token), stop_(stop) {
    bind_and_listen(listener_.get(), port, "--http-port");
    sockaddr_in address{};
    socklen_t size = sizeof address;
    if (::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&address), &size) != 0)
        throw std::system_error(errno, std::generic_category(), "getsockname of the --http-port listener");
    port_ = ntohs(address.sin_port);
}

void Http_server::serve() {
    // libmicrohttpd owns the listening socket from here and closes it.
    const int listener = listener_.release();
    MHD_Daemon* daemon = MHD_start_daemon(
        MHD_USE_POLL_INTERNAL_THREAD, 0, nullptr, nullptr, &Context::on_request, this,
        MHD_OPTION_LISTEN_SOCKET, listener, MHD_OPTION_THREAD_POOL_SIZE, worker_threads,
        MHD_OPTION_CONNECTION_LIMIT, max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        max_connections_per_address, MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout_seconds,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_memory, MHD_OPTION_NOTIFY_COMPLETED, &forget_request, nullptr,
        MHD_OPTION_END);
    if (daemon == nullptr) {
        ::close(listener);
        throw std::runtime_error("the control API server (libmicrohttpd) did not start on port " +
                                 std::to_string(port_));
    }
    pollfd watch{stop_.fd(), POLLIN, 0};
    while (::poll(&watch, 1, -1) < 0 && errno == EINTR) {
    }
    MHD_stop_daemon(daemon);
}

Http_response Http_server::answer(MHD_Connection* connection, std::string_view method, std::string_view path,
                                  std::string_view body) {
    std::vector<Http_header> headers;
    MHD_get_connection_values(connection, MHD_HEADER_KIND, &collect_header, &headers);
    const Http_request request{method, path, std::move(headers), body};
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
    return response;
}

}  // namespace eb
