#include "formats/stream_map.hpp"

#include <limits>
#include <stdexcept>
#include <unordered_set>

#include "base/stream_name.hpp"
#include "formats/wire_format.hpp"

namespace eb {
namespace {

void append_list(std::vector<std::byte>& out, const std::vector<std::string>& names) {
    if (names.size() > std::numeric_limits<std::uint16_t>::max())
        throw std::invalid_argument("stream map: " + std::to_string(names.size()) + " streams in one list, at most 65535");
    const auto count = static_cast<std::uint16_t>(names.size());
    out.push_back(static_cast<std::byte>(count & 0xFF));
    out.push_back(static_cast<std::byte>(count >> 8));
    for (const std::string& name : names) {
        if (!valid_stream_name(name))
            throw std::invalid_argument("stream map: '" + name + "' is not " + std::string(stream_name_rule));
        out.push_back(static_cast<std::byte>(name.size()));
        for (const char c : name) out.push_back(static_cast<std::byte>(c));
    }
}

// Reads one list at `at`, advancing it; false (with `problem`) if malformed.
bool read_list(std::span<const std::byte> bytes, std::size_t& at, std::vector<std::string>& names,
               std::unordered_set<std::string>& seen, std::string& problem) {
    if (bytes.size() - at < 2) {
        problem = "a count at byte " + std::to_string(at) + " runs past the map's " + std::to_string(bytes.size()) + " bytes";
        return false;
    }
    const auto count = static_cast<std::uint16_t>(std::to_integer<unsigned>(bytes[at]) |
                                                  (std::to_integer<unsigned>(bytes[at + 1]) << 8));
    at += 2;
    names.clear();
    for (std::uint16_t i = 0; i < count; ++i) {
        const std::size_t length = at < bytes.size() ? std::to_integer<std::size_t>(bytes[at]) : 0;
        if (at >= bytes.size() || bytes.size() - at - 1 < length) {
            problem = "a name at byte " + std::to_string(at) + " runs past the map's " + std::to_string(bytes.size()) + " bytes";
            return false;
        }
        std::string name(reinterpret_cast<const char*>(bytes.data() + at + 1), length);
        if (!valid_stream_name(name)) {
            problem = "the name at byte " + std::to_string(at) + " is not " + std::string(stream_name_rule);
            return false;
        }
        if (!seen.insert(name).second) {
            problem = "stream '" + name + "' is listed twice";
            return false;
        }
        names.push_back(std::move(name));
        at += 1 + length;
    }
    return true;
}

}  // namespace

std::vector<std::byte> encode_stream_map(const Stream_map& map) {
    std::vector<std::byte> out;
    for (const std::vector<std::string>& names : map.held) append_list(out, names);
    append_list(out, map.lacked);
    out.resize(align_up(out.size()), std::byte{0});
    return out;
}

Parse_status parse_stream_map(std::span<const std::byte> bytes, std::uint32_t slots, Stream_map& map) {
    // Each of the slots + 1 lists has a 2-byte count: check before allocating for a hostile slot count.
    if (bytes.size() / 2 < std::uint64_t{slots} + 1)
        return parse_failure("MEP", Parse_error::bad_stream_map, "stream map: ", bytes.size(), " bytes cannot hold the ",
                             std::uint64_t{slots} + 1, " lists of ", slots, " slots");
    Stream_map candidate;
    candidate.held.resize(slots);
    std::unordered_set<std::string> seen;
    std::size_t at = 0;
    std::string problem;
    for (std::uint32_t slot = 0; slot < slots && problem.empty(); ++slot)
        if (!read_list(bytes, at, candidate.held[slot], seen, problem)) problem = "slot " + std::to_string(slot) + ": " + problem;
    if (problem.empty() && !read_list(bytes, at, candidate.lacked, seen, problem)) problem = "lacked streams: " + problem;
    if (problem.empty() && bytes.size() - at >= wire_alignment)
        problem = std::to_string(bytes.size() - at) + " bytes follow the lists, more than the padding";
    for (std::size_t i = at; problem.empty() && i < bytes.size(); ++i)
        if (bytes[i] != std::byte{0}) problem = "padding byte " + std::to_string(i) + " is not 0";
    if (!problem.empty()) return parse_failure("MEP", Parse_error::bad_stream_map, "stream map: ", problem);
    map = std::move(candidate);
    return {};
}

std::string describe_stream_map(const Stream_map& map) {
    std::size_t held = 0;
    for (const auto& names : map.held) held += names.size();
    if (held == 0 && map.lacked.empty()) return "no streams named";
    std::string text = std::to_string(held) + " streams held";
    if (map.lacked.empty()) return text + ", none lacked";
    text += ", lacks ";
    for (std::size_t i = 0; i < map.lacked.size(); ++i) text += (i == 0 ? "" : ",") + map.lacked[i];
    return text;
}

}  // namespace eb
