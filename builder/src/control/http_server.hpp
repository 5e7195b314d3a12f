#pragma once

#include <cstdint>

#include "control_api.hpp"
#include "control_token.hpp"
#include "fd.hpp"
#include "stop_flag.hpp"

namespace eb {

// Serves the control API (docs/control-api.md) on 0.0.0.0:port from one
// thread, one request per connection. Enough for the operator, probes and
// Prometheus scrapes.
class Http_server {
public:
    // Binds at once, so a port clash fails at startup, not in the thread.
    // Port 0 takes a free one (tests); port() tells which.
    Http_server(std::uint16_t port, Control_target& target, const Control_token& token, const Stop_flag& stop);

    std::uint16_t port() const;

    // Answers requests until stop is requested.
    void serve();

private:
    void answer(Fd client);

    Fd listener_;
    Control_target& target_;
    const Control_token& token_;
    const Stop_flag& stop_;
};

}  // namespace eb
