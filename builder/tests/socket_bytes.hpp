#pragma once

#include <cstdint>

namespace eb::test {

// The bytes a connected TCP socket has received so far, as the kernel counts
// them (TCP_INFO's tcpi_bytes_received): which connections carried data.
std::uint64_t bytes_received(int fd);

}  // namespace eb::test
