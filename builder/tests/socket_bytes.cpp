#include "socket_bytes.hpp"

// linux/tcp.h, not netinet/tcp.h: glibc's tcp_info stops before the byte counts.
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace eb::test {

std::uint64_t bytes_received(int fd) {
    tcp_info info{};
    socklen_t length = sizeof info;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0)
        throw std::runtime_error(std::string("TCP_INFO: ") + std::strerror(errno));
    if (length < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received)
        throw std::runtime_error("TCP_INFO: this kernel counts no received bytes (Linux 4.1 or later does)");
    return info.tcpi_bytes_received;
}

}  // namespace eb::test
