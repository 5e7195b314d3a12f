#include "base/socket.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

namespace eb {
namespace {

constexpr int wanted_buffer_bytes = 4 << 20;

long read_sysctl(const char* path) {
    std::ifstream file(path);
    long value = 0;
    file >> value;
    return value;
}

// Setting SO_SNDBUF/SO_RCVBUF turns off the kernel's buffer autotuning, which
// by default already grows to tcp_rmem/tcp_wmem max (4 MiB or more), while an
// explicit request is capped at net.core.[rw]mem_max (often only 208 KiB). So
// ask explicitly only where that cap allows the full size.
bool explicit_buffers_pay_off() {
    static const bool allowed = read_sysctl("/proc/sys/net/core/rmem_max") >= wanted_buffer_bytes &&
                                read_sysctl("/proc/sys/net/core/wmem_max") >= wanted_buffer_bytes;
    return allowed;
}

void set_option(int fd, int level, int name, int value, const char* what) {
    if (::setsockopt(fd, level, name, &value, sizeof value) != 0)
        throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

Fd tcp_socket() {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) throw std::system_error(errno, std::generic_category(), "socket");
    return fd;
}

void bind_and_listen(int fd, std::uint16_t port, const std::string& role) {
    // A restarted unit must be able to listen again while old connections linger.
    set_option(fd, SOL_SOCKET, SO_REUSEADDR, 1, "setsockopt(SO_REUSEADDR)");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(port);
    const std::string where = "0.0.0.0:" + std::to_string(port) + " (" + role + ")";
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
        throw std::system_error(errno, std::generic_category(), "cannot bind " + where);
    if (::listen(fd, SOMAXCONN) != 0)
        throw std::system_error(errno, std::generic_category(), "cannot listen on " + where);
}

void tune_data_socket(int fd, int peer_timeout_ms) {
    set_option(fd, IPPROTO_TCP, TCP_NODELAY, 1, "setsockopt(TCP_NODELAY)");
    // A peer host that vanishes (power, network) sends no FIN or RST: without
    // these, poll() on its socket would wait forever. Unacknowledged data or
    // probes for peer_timeout_ms end the connection with ETIMEDOUT, and the
    // transport marks the peer lost.
    set_option(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "setsockopt(SO_KEEPALIVE)");
    set_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, keepalive_idle_s, "setsockopt(TCP_KEEPIDLE)");
    set_option(fd, IPPROTO_TCP, TCP_KEEPINTVL, keepalive_interval_s, "setsockopt(TCP_KEEPINTVL)");
    set_option(fd, IPPROTO_TCP, TCP_KEEPCNT, keepalive_probes, "setsockopt(TCP_KEEPCNT)");
    set_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, peer_timeout_ms, "setsockopt(TCP_USER_TIMEOUT)");
    if (!explicit_buffers_pay_off()) return;
    set_option(fd, SOL_SOCKET, SO_SNDBUF, wanted_buffer_bytes, "setsockopt(SO_SNDBUF)");
    set_option(fd, SOL_SOCKET, SO_RCVBUF, wanted_buffer_bytes, "setsockopt(SO_RCVBUF)");
}

std::string error_text(int error) {
    char text[256];
    return strerror_r(error, text, sizeof text);  // the GNU variant returns the text
}

}  // namespace eb
