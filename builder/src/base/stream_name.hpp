#pragma once

#include <cstddef>
#include <string_view>

namespace eb {

// A readout stream (a detector source: a fibre into a readout card) is
// named as the Fabric's endpoints[].streams name it. Names travel in rank
// tables, in every MEP's stream map and in text files beside a MEP ring,
// so they are kept to characters every one of those carries as is.
inline constexpr std::size_t max_stream_name_bytes = 128;
inline constexpr std::string_view stream_name_rule =
    "a stream name of 1 to 128 characters, letters, digits and . _ : / - (starting with a letter or digit)";

constexpr bool valid_stream_name(std::string_view name) {
    if (name.empty() || name.size() > max_stream_name_bytes) return false;
    for (std::size_t i = 0; i < name.size(); ++i) {
        const char c = name[i];
        const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != ':' && c != '/' && c != '-'))) return false;
    }
    return true;
}

}  // namespace eb
