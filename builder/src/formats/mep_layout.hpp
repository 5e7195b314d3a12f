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
    std::uint64_t total_bytes = 0;

    friend bool operator==(const Mep_layout&, const Mep_layout&) = default;
};

// Bytes of the MEP header including the offsets table.
std::uint64_t mep_header_bytes(std::size_t source_count);

// MFPs follow the header in source order, each starting aligned.
Mep_layout mep_layout(std::span<const std::uint64_t> mfp_bytes);

// Writes the header and offsets table into the first mep_header_bytes() of
// `mep`, which must be layout.total_bytes long.
void write_mep_header(std::span<std::byte> mep, const Mep_layout& layout, std::uint64_t first_event_id,
                      std::uint32_t event_count, std::uint32_t epoch);

}  // namespace eb
