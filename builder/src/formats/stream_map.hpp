#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "formats/parse_error.hpp"

namespace eb {

// Which readout streams a MEP holds (docs/formats.md, "Stream map"): for
// each source slot, the streams its RU reads (the rank table's
// ranks[].sources), and the streams of the run that no slot holds because
// a failure left them unread (the table's unreadStreams). A MEP that lacks
// a stream holds no complete event. A run without named streams has an
// empty list per slot and lacks none.
struct Stream_map {
    std::vector<std::vector<std::string>> held;  // by slot
    std::vector<std::string> lacked;

    bool lacks_streams() const { return !lacked.empty(); }
    friend bool operator==(const Stream_map&, const Stream_map&) = default;
};

// Encoded: per slot a u16 count then the names, then a u16 count and the
// lacked names; each name a u8 length and its bytes; zero padding to a
// multiple of 8. Throws std::invalid_argument for a name that is not a
// valid stream name or a list over 65535 (the rank table is checked first).
std::vector<std::byte> encode_stream_map(const Stream_map& map);

// Reads a map of `slots` slots from `bytes`, the MEP's stream_map_bytes:
// bad_stream_map if a count or name runs past the end, a name is not a
// valid stream name, a stream is listed twice, or anything but zero
// padding (under 8 bytes) follows.
Parse_status parse_stream_map(std::span<const std::byte> bytes, std::uint32_t slots, Stream_map& map);

// "3 streams held, lacks w1-ut0,w1-ut1" or "no streams named": for logs.
std::string describe_stream_map(const Stream_map& map);

}  // namespace eb
