#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace eb {

// What one generated MFP holds: `fragment_count` fragments of `payload_bytes`
// each, for events [first_event_id, first_event_id + fragment_count).
struct Mfp_spec {
    std::uint32_t source_id = 0;
    std::uint64_t first_event_id = 0;
    std::uint32_t fragment_count = 0;
    std::uint32_t payload_bytes = 0;
};

// Bytes one fragment occupies in an MFP: header, payload, alignment padding.
std::uint64_t fragment_stride(std::uint32_t payload_bytes);

// Bytes of an MFP of `fragment_count` fragments of `payload_bytes` each.
std::uint64_t mfp_bytes(std::uint32_t fragment_count, std::uint32_t payload_bytes);

// Writes the MFP described by `spec` into `out`, which must be exactly
// mfp_bytes(spec.fragment_count, spec.payload_bytes) long.
void write_mfp(std::span<std::byte> out, const Mfp_spec& spec);

}  // namespace eb
