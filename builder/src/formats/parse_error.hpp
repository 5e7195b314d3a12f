#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "base/kind_counts.hpp"

namespace eb {

// Why an MFP or MEP was rejected. Each has a stable name, used in logs and as
// the `error` label of eb_parse_errors_total.
enum class Parse_error : std::uint8_t {
    none,
    truncated,             // shorter than its header or tables
    bad_magic,
    bad_version,
    bad_alignment,         // alignment field out of range, or a misaligned offset
    size_mismatch,         // header's total_bytes differs from the packet's size
    fragment_overflow,     // fragments run past the packet end
    trailing_bytes,        // bytes left after the last fragment
    wrong_source,          // not the source expected in this place
    wrong_event_range,     // not the events expected
    wrong_fragment_count,  // not the packing factor
    bad_offset,            // a MEP's MFP offset outside the MEP or out of order
    wrong_source_count,    // a MEP without one MFP of every live source
    bad_stream_map,        // a MEP's stream map malformed
    wrong_streams,         // a MEP's stream map is not the one its rank table gives
};
inline constexpr std::size_t parse_error_kinds = 15;

std::string_view parse_error_name(Parse_error error);

// The outcome of a parse: the error, and for a person what exactly was wrong.
struct Parse_status {
    Parse_error error = Parse_error::none;
    std::string detail;

    bool ok() const { return error == Parse_error::none; }
};

// The rejection of a packet ("MFP", "MEP"): the error, and as detail its name
// followed by the parts, streamed.
template <class... Parts>
Parse_status parse_failure(std::string_view packet, Parse_error error, const Parts&... parts) {
    std::ostringstream text;
    text << packet << ' ' << parse_error_name(error) << ": ";
    (text << ... << parts);
    return {error, text.str()};
}

// Rejections counted by kind; written by the data path, read by /metrics.
using Parse_error_counts = Kind_counts<Parse_error, parse_error_kinds>;

}  // namespace eb
