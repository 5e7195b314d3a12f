#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/data_threads.hpp"

namespace eb {

// What one generated MFP holds: fragments of consecutive events from
// first_event_id on, one per entry of `sizes`, all of `type`.
struct Mfp_spec {
    std::uint32_t source_id = 0;
    std::uint64_t first_event_id = 0;
    std::uint8_t type = 0;
};

// Where the first payload starts: after the header and the type and size tables.
std::uint64_t mfp_payload_start(std::uint32_t fragment_count);

// Bytes of an MFP with fragments of these payload sizes, padding included.
std::uint64_t mfp_bytes(std::span<const std::uint16_t> sizes);

// Bytes of an MFP of `fragment_count` fragments of `payload_bytes` each.
std::uint64_t mfp_bytes(std::uint32_t fragment_count, std::uint32_t payload_bytes);

// Writes the MFP into `out`, which must be exactly mfp_bytes(sizes) long:
// header, tables, generator payloads (payload.hpp) and zeroed padding. With
// `threads`, the payloads are written in parts on them.
void write_mfp(std::span<std::byte> out, const Mfp_spec& spec, std::span<const std::uint16_t> sizes,
               Data_threads* threads = nullptr);

}  // namespace eb
