#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "peer_address.hpp"
#include "rank.hpp"

namespace eb {

// Settings of one eb-builder process, from its command line.
struct Config {
    Rank rank = 0;
    std::vector<Peer_address> peers;  // every unit's data address, in rank order
    std::uint16_t http_port = 8080;
    std::uint32_t packing_factor = 1000;
    std::uint32_t fragment_size = 128;
    std::uint64_t events = 0;  // 0: until stopped

    Rank units() const { return static_cast<Rank>(peers.size()); }
};

struct Show_help {};
struct Usage_error {
    std::string message;  // names the flag and how to fix it
};
using Command_line = std::variant<Config, Show_help, Usage_error>;

// `args` excludes the program name. Flags take "--flag value" or "--flag=value".
Command_line parse_command_line(std::span<const std::string_view> args);

std::string usage();

}  // namespace eb
