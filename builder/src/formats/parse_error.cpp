#include "formats/parse_error.hpp"

namespace eb {

std::string_view parse_error_name(Parse_error error) {
    switch (error) {
        case Parse_error::none: return "none";
        case Parse_error::truncated: return "truncated";
        case Parse_error::bad_magic: return "bad_magic";
        case Parse_error::bad_version: return "bad_version";
        case Parse_error::bad_alignment: return "bad_alignment";
        case Parse_error::size_mismatch: return "size_mismatch";
        case Parse_error::fragment_overflow: return "fragment_overflow";
        case Parse_error::trailing_bytes: return "trailing_bytes";
        case Parse_error::wrong_source: return "wrong_source";
        case Parse_error::wrong_event_range: return "wrong_event_range";
        case Parse_error::wrong_fragment_count: return "wrong_fragment_count";
        case Parse_error::bad_offset: return "bad_offset";
        case Parse_error::wrong_source_count: return "wrong_source_count";
        case Parse_error::bad_stream_map: return "bad_stream_map";
        case Parse_error::wrong_streams: return "wrong_streams";
    }
    return "unknown";
}

}  // namespace eb
