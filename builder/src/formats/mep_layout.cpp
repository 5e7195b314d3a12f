#include "mep_layout.hpp"

#include <stdexcept>

#include "wire_format.hpp"

namespace eb {

std::uint64_t mep_header_bytes(std::size_t source_count) {
    return sizeof(Mep_header) + source_count * sizeof(std::uint64_t);
}

Mep_layout mep_layout(std::span<const std::uint64_t> mfp_bytes) {
    Mep_layout layout;
    layout.offsets.reserve(mfp_bytes.size());
    std::uint64_t at = mep_header_bytes(mfp_bytes.size());
    for (std::uint64_t bytes : mfp_bytes) {
        layout.offsets.push_back(at);
        at += align_up(bytes);
    }
    layout.total_bytes = at;
    return layout;
}

void write_mep_header(std::span<std::byte> mep, const Mep_layout& layout,
                      std::uint64_t first_event_id, std::uint32_t event_count, std::uint32_t epoch) {
    if (mep.size() != layout.total_bytes)
        throw std::invalid_argument("write_mep_header: buffer size differs from the layout");
    store(mep, 0,
          Mep_header{.magic = mep_magic,
                     .version = wire_version,
                     .source_count = static_cast<std::uint32_t>(layout.offsets.size()),
                     .event_count = event_count,
                     .epoch = epoch,
                     .first_event_id = first_event_id,
                     .total_bytes = layout.total_bytes});
    std::size_t at = sizeof(Mep_header);
    for (std::uint64_t offset : layout.offsets) {
        store(mep, at, offset);
        at += sizeof offset;
    }
}

}  // namespace eb
