#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/mfp_parser.hpp"
#include "formats/parse_error.hpp"
#include "formats/stream_map.hpp"
#include "formats/wire_format.hpp"

namespace eb {

// A MEP whose header, offsets table and stream map's extent are checked:
// slot(i) is the byte range reserved for source i's MFP (its aligned size),
// within the MEP; stream_map() the encoded map (parse_stream_map reads it).
struct Mep_view {
    Mep_header header{};
    std::span<const std::byte> bytes;

    std::uint64_t offset(std::uint32_t slot) const {
        return load<std::uint64_t>(bytes, sizeof(Mep_header) + std::size_t{slot} * sizeof(std::uint64_t));
    }
    std::span<const std::byte> stream_map() const {
        return bytes.subspan(sizeof(Mep_header) + std::size_t{header.source_count} * sizeof(std::uint64_t),
                             header.stream_map_bytes);
    }
    std::span<const std::byte> slot(std::uint32_t i) const {
        const std::uint64_t end = i + 1 < header.source_count ? offset(i + 1) : bytes.size();
        return bytes.subspan(offset(i), end - offset(i));
    }
};

// Checks the MEP header and offsets table: magic, version, total size equal
// to bytes.size(), the stream map's size aligned and within the MEP, offsets
// aligned, ascending, after the table and map and within the MEP.
Parse_status parse_mep_frame(std::span<const std::byte> bytes, Mep_view& view);

// The MFP in a slot: the slot is the MFP padded to wire_alignment.
std::span<const std::byte> mfp_in_slot(std::span<const std::byte> slot);

// parse_mep_frame, then the stream map is well formed (into `streams`) and
// every slot holds a well-formed MFP of the MEP's events and packing, with
// source ids strictly ascending (one per source).
Parse_status parse_mep(std::span<const std::byte> bytes, Mep_view& view, Stream_map& streams);

}  // namespace eb
