#pragma once

#include <cstdint>
#include <string>

#include "fd.hpp"

namespace eb {

// Thin wrappers over POSIX TCP sockets. Failures throw std::system_error
// whose text names the operation.

// A non-blocking, close-on-exec IPv4 TCP socket.
Fd tcp_socket();

// Binds `fd` to 0.0.0.0:`port` and listens. `role` names the port in errors.
void bind_and_listen(int fd, std::uint16_t port, const std::string& role);

// Data-plane tuning: no Nagle delay (announcements are small and latency
// bound) and large buffers where the kernel allows them. Call before
// connect()/listen(), so the TCP window scale is negotiated for them.
void tune_data_socket(int fd);

// strerror() for `error`, thread-safe.
std::string error_text(int error);

}  // namespace eb
