#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "unit/config.hpp"

namespace eb {

// eb-builder's command line: flags into a Config.
struct Show_help {};
struct Describe_flags {};
struct Usage_error {
    std::string message;  // names the flag and how to fix it
};
using Command_line = std::variant<Config, Show_help, Describe_flags, Usage_error>;

// `args` excludes the program name. Flags take "--flag value" or "--flag=value".
Command_line parse_command_line(std::span<const std::string_view> args);

// The command line being parsed: the Config, and the rank if given.
struct Flag_state {
    Config config;
    std::optional<Rank> rank;
};

// One flag of eb-builder. The table of them is the one place a flag is
// named, ranged, defaulted and explained: the parser, --help and
// --describe-flags (JSON, which the operator's tests hold the CRD and the
// pod command line against) all read it.
struct Flag_spec {
    std::string_view name = {};    // "--packing-factor"
    std::string_view value_name = {};  // "F", as --help shows it
    std::string_view help = {};    // what it does; --help wraps it and adds the default
    std::string_view fallback = {};     // its default, as a value of the flag; empty: none, or one `help` describes
    std::string_view environment = {};  // the variable read in its place when it is absent; empty: none
    std::uint64_t min = 0, max = 0;             // a whole number: its range; else both 0
    std::span<const std::string_view> choices = {};  // one of these; else empty
    std::optional<Usage_error> (*parse)(const Flag_spec& spec, std::string_view value, Flag_state& state) = nullptr;
    // The value a Config holds, for a fallback to be checked against; null where there is none.
    std::string (*show)(const Config& config) = nullptr;
};

std::span<const Flag_spec> flag_table();
std::string usage();           // --help
std::string describe_flags();  // --describe-flags: {"flags": [{name, value_name, ...}, ...]}

}  // namespace eb
