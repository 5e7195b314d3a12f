#pragma once

#include <cstdint>

#include "control/control_api.hpp"
#include "control/control_token.hpp"
#include "base/fd.hpp"
#include "control/http.hpp"
#include "base/stop_flag.hpp"

struct MHD_Connection;

namespace eb {

// Serves the control API (docs/control-api.md) on 0.0.0.0:port with
// libmicrohttpd: one poll() loop per worker thread, so idle or trickling
// clients cost a connection slot each and never hold up the probes.
// Limits (http_server.cpp): connections, in all and per client address,
// request head size, body size, time to send a body, idle time.
class Http_server {
public:
    static constexpr unsigned max_connections = 512;
    // One address (a broken client, a scanner) cannot take the slots the
    // probes need: more of its connections are closed at once. The unit's
    // legitimate clients (the kubelet's probes, the operator's polls and
    // commands on one kept connection, Prometheus) hold a few each.
    static constexpr unsigned max_connections_per_address = 16;
    static constexpr unsigned idle_timeout_seconds = 3;

    // Binds at once, so a port clash fails at startup, not in the thread.
    // Port 0 takes a free one (tests); port() tells which.
    Http_server(std::uint16_t port, Control_target& target, const Control_token& token, const Stop_flag& stop);
    Http_server(const Http_server&) = delete;
    Http_server& operator=(const Http_server&) = delete;

    std::uint16_t port() const { return port_; }

    // Answers requests until stop is requested. Throws std::runtime_error
    // if the server cannot start.
    void serve();

    // The answer to one whole request (public for the libmicrohttpd callback).
    struct Context;

private:
    Http_response answer(MHD_Connection* connection, std::string_view method, std::string_view path,
                         std::string_view body);

    Fd listener_;
    std::uint16_t port_;
    Control_target& target_;
    const Control_token& token_;
    const Stop_flag& stop_;
};

}  // namespace eb
