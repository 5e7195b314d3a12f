#pragma once

#include <cstdint>

#include "fd.hpp"
#include "stop_flag.hpp"
#include "unit_status.hpp"

namespace eb {

// Serves /status, /metrics and /healthz on 0.0.0.0:port from one thread, one
// request per connection. Enough for probes and Prometheus scrapes.
class Http_server {
public:
    // Binds at once, so a port clash fails at startup, not in the thread.
    Http_server(std::uint16_t port, const Unit_status& status, const Stop_flag& stop);

    // Answers requests until stop is requested.
    void serve();

private:
    void answer(Fd client);

    Fd listener_;
    const Unit_status& status_;
    const Stop_flag& stop_;
};

}  // namespace eb
