#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "formats/parse_error.hpp"
#include "formats/wire_format.hpp"

namespace eb {

// A checked MFP: every fragment lies within `bytes`, so walking it is safe.
struct Mfp_view {
    Mfp_header header{};
    std::span<const std::byte> bytes;

    std::uint8_t type(std::uint32_t i) const { return static_cast<std::uint8_t>(bytes[sizeof(Mfp_header) + i]); }
    std::uint16_t size(std::uint32_t i) const {
        return load<std::uint16_t>(bytes, sizeof(Mfp_header) + header.fragment_count + 2 * std::size_t{i});
    }
};

// Calls visit(index, type, payload) for each fragment of a checked MFP, in order.
template <class Visit>
void for_each_fragment(const Mfp_view& mfp, Visit&& visit) {
    const std::uint64_t alignment = std::uint64_t{1} << mfp.header.align_log2;
    const auto align = [&](std::uint64_t at) { return (at + alignment - 1) & ~(alignment - 1); };
    std::uint64_t at = align(sizeof(Mfp_header) + std::uint64_t{mfp.header.fragment_count} * 3);
    for (std::uint32_t i = 0; i < mfp.header.fragment_count; ++i) {
        const std::uint16_t size = mfp.size(i);
        visit(i, mfp.type(i), mfp.bytes.subspan(at, size));
        at = align(at + size);
    }
}

// Checks that `bytes` is exactly one well-formed MFP: magic, version,
// alignment, total size equal to bytes.size(), tables and every fragment
// within it, nothing after the last. Fills `view` only when it is.
Parse_status parse_mfp(std::span<const std::byte> bytes, Mfp_view& view);

// What the MFP in a given place must be.
struct Mfp_expectation {
    std::optional<std::uint32_t> source_id;
    std::uint64_t first_event_id = 0;
    std::uint32_t fragment_count = 0;
};

// parse_mfp, then source, event range and fragment count as expected.
Parse_status parse_mfp(std::span<const std::byte> bytes, const Mfp_expectation& expected, Mfp_view& view);

}  // namespace eb
