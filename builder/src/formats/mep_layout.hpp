#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace eb {

// Where each source's MFP goes in a MEP, computed by the BU from the announced
// MFP sizes before any MFP arrives, so each can be received straight into place.
struct Mep_layout {
    std::vector<std::uint64_t> offsets;  // per source, from the MEP start
    std::uint64_t stream_map_bytes = 0;
    std::uint64_t total_bytes = 0;

    friend bool operator==(const Mep_layout&, const Mep_layout&) = default;
};

// Bytes of the MEP header including the offsets table and the stream map
// (encoded: a multiple of 8; every MEP has one, s + 1 lists at least).
std::uint64_t mep_header_bytes(std::size_t source_count, std::uint64_t stream_map_bytes);

// MFPs follow the header in source order, each starting aligned.
Mep_layout mep_layout(std::span<const std::uint64_t> mfp_bytes, std::uint64_t stream_map_bytes);

// Writes the header, offsets table and `stream_map` (encode_stream_map's,
// layout.stream_map_bytes long) into the first mep_header_bytes() of `mep`,
// which must be layout.total_bytes long.
void write_mep_header(std::span<std::byte> mep, const Mep_layout& layout, std::uint64_t first_event_id,
                      std::uint32_t event_count, std::uint32_t epoch, std::span<const std::byte> stream_map);

}  // namespace eb
