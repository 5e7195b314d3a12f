#pragma once

#include <cstdint>
#include <string>

#include "base/fd.hpp"

namespace eb {

// Thin wrappers over POSIX TCP sockets. Failures throw std::system_error
// whose text names the operation.

// A non-blocking, close-on-exec IPv4 TCP socket.
Fd tcp_socket();

// Binds `fd` to 0.0.0.0:`port` and listens. `role` names the port in errors.
void bind_and_listen(int fd, std::uint16_t port, const std::string& role);

// Keepalive of data sockets: an idle connection is probed after 1 s, every
// 1 s. The user timeout (--peer-timeout-ms) bounds how long sent data or
// probes may go unacknowledged before the connection fails (ETIMEDOUT).
inline constexpr int keepalive_idle_s = 1;
inline constexpr int keepalive_interval_s = 1;
inline constexpr int keepalive_probes = 3;
inline constexpr int default_peer_timeout_ms = 1000;

// Data-plane tuning: no Nagle delay (announcements are small and latency
// bound), keepalive probes and a user timeout, so a lost peer host fails the
// transfer instead of hanging it, and large buffers where the kernel allows
// them. Call before
// connect()/listen(), so the TCP window scale is negotiated for them.
void tune_data_socket(int fd, int peer_timeout_ms = default_peer_timeout_ms);

// strerror() for `error`, thread-safe.
std::string error_text(int error);

}  // namespace eb
