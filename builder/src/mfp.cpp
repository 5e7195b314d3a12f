#include "mfp.hpp"

#include <cstring>
#include <stdexcept>

#include "payload.hpp"
#include "wire_format.hpp"

namespace eb {

std::uint64_t fragment_stride(std::uint32_t payload_bytes) {
    return align_up(sizeof(Fragment_header) + std::uint64_t{payload_bytes});
}

std::uint64_t mfp_bytes(std::uint32_t fragment_count, std::uint32_t payload_bytes) {
    return sizeof(Mfp_header) + std::uint64_t{fragment_count} * fragment_stride(payload_bytes);
}

void write_mfp(std::span<std::byte> out, const Mfp_spec& spec) {
    const std::uint64_t total = mfp_bytes(spec.fragment_count, spec.payload_bytes);
    if (out.size() != total) throw std::invalid_argument("write_mfp: buffer size differs from the MFP size");

    store(out, 0,
          Mfp_header{.magic = mfp_magic,
                     .version = wire_version,
                     .fragment_count = spec.fragment_count,
                     .first_event_id = spec.first_event_id,
                     .total_bytes = total,
                     .source_id = spec.source_id,
                     .reserved = 0});
    const std::uint64_t stride = fragment_stride(spec.payload_bytes);
    const std::size_t padding = stride - sizeof(Fragment_header) - spec.payload_bytes;
    std::size_t at = sizeof(Mfp_header);
    for (std::uint32_t i = 0; i < spec.fragment_count; ++i, at += stride) {
        const std::uint64_t event_id = spec.first_event_id + i;
        store(out, at, Fragment_header{event_id, spec.source_id, spec.payload_bytes});
        auto payload = out.subspan(at + sizeof(Fragment_header), spec.payload_bytes);
        fill_payload(payload, spec.source_id, event_id);
        // Zero the padding: every byte on the wire is then defined.
        std::memset(payload.data() + payload.size(), 0, padding);
    }
}

}  // namespace eb
