#pragma once

#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "config.hpp"

namespace eb {

// eb-builder's command line: flags into a Config.
struct Show_help {};
struct Usage_error {
    std::string message;  // names the flag and how to fix it
};
using Command_line = std::variant<Config, Show_help, Usage_error>;

// `args` excludes the program name. Flags take "--flag value" or "--flag=value".
Command_line parse_command_line(std::span<const std::string_view> args);

std::string usage();

}  // namespace eb
