#include "formats/mep_layout.hpp"

#include <cstring>
#include <stdexcept>

#include "formats/wire_format.hpp"

namespace eb {

std::uint64_t mep_header_bytes(std::size_t source_count, std::uint64_t stream_map_bytes) {
    return sizeof(Mep_header) + source_count * sizeof(std::uint64_t) + stream_map_bytes;
}

Mep_layout mep_layout(std::span<const std::uint64_t> mfp_bytes, std::uint64_t stream_map_bytes) {
    if (stream_map_bytes % wire_alignment != 0 || stream_map_bytes > UINT32_MAX)
        throw std::invalid_argument("mep_layout: a stream map of " + std::to_string(stream_map_bytes) +
                                    " bytes; encode_stream_map pads it to a multiple of 8, under 4 GiB");
    Mep_layout layout;
    layout.offsets.reserve(mfp_bytes.size());
    layout.stream_map_bytes = stream_map_bytes;
    std::uint64_t at = mep_header_bytes(mfp_bytes.size(), stream_map_bytes);
    for (std::uint64_t bytes : mfp_bytes) {
        layout.offsets.push_back(at);
        at += align_up(bytes);
    }
    layout.total_bytes = at;
    return layout;
}

void write_mep_header(std::span<std::byte> mep, const Mep_layout& layout, std::uint64_t first_event_id,
                      std::uint32_t event_count, std::uint32_t epoch, std::span<const std::byte> stream_map) {
    if (mep.size() != layout.total_bytes)
        throw std::invalid_argument("write_mep_header: buffer size differs from the layout");
    if (stream_map.size() != layout.stream_map_bytes)
        throw std::invalid_argument("write_mep_header: the stream map's size differs from the layout");
    store(mep, 0,
          Mep_header{.magic = mep_magic,
                     .version = mep_version,
                     .source_count = static_cast<std::uint32_t>(layout.offsets.size()),
                     .event_count = event_count,
                     .epoch = epoch,
                     .first_event_id = first_event_id,
                     .total_bytes = layout.total_bytes,
                     .stream_map_bytes = static_cast<std::uint32_t>(layout.stream_map_bytes),
                     .reserved = 0});
    std::size_t at = sizeof(Mep_header);
    for (std::uint64_t offset : layout.offsets) {
        store(mep, at, offset);
        at += sizeof offset;
    }
    if (!stream_map.empty()) std::memcpy(mep.data() + at, stream_map.data(), stream_map.size());
}

}  // namespace eb
