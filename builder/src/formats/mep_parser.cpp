#include "formats/mep_parser.hpp"

#include <optional>
#include <utility>

#include "formats/mep_layout.hpp"

namespace eb {

Parse_status parse_mep_frame(std::span<const std::byte> bytes, Mep_view& view) {
    if (bytes.size() < sizeof(Mep_header))
        return parse_failure("MEP", Parse_error::truncated, bytes.size(), " bytes, shorter than the ", sizeof(Mep_header),
                             "-byte header");
    const auto header = load<Mep_header>(bytes, 0);
    if (header.magic != mep_magic)
        return parse_failure("MEP", Parse_error::bad_magic, "magic 0x", std::hex, header.magic, ", expected 0x", mep_magic);
    if (header.version != mep_version)
        return parse_failure("MEP", Parse_error::bad_version, "version ", header.version, ", this reader knows ", mep_version);
    if (header.total_bytes != bytes.size())
        return parse_failure("MEP", Parse_error::size_mismatch, "header says ", header.total_bytes, " bytes, the packet has ",
                             bytes.size());
    if (header.stream_map_bytes % wire_alignment != 0)
        return parse_failure("MEP", Parse_error::bad_alignment, "stream map of ", header.stream_map_bytes,
                             " bytes, not a multiple of ", wire_alignment);
    // No overflow: both counts are u32.
    const std::uint64_t table_end = mep_header_bytes(header.source_count, header.stream_map_bytes);
    if (table_end > bytes.size())
        return parse_failure("MEP", Parse_error::truncated, header.source_count, " sources and a ", header.stream_map_bytes,
                             "-byte stream map need a ", table_end, "-byte header, the packet has ", bytes.size());
    const Mep_view candidate{header, bytes};
    std::uint64_t free_from = table_end;
    for (std::uint32_t i = 0; i < header.source_count; ++i) {
        const std::uint64_t offset = candidate.offset(i);
        if (offset < free_from || offset >= bytes.size())
            return parse_failure("MEP", Parse_error::bad_offset, "slot ", i, " at offset ", offset, ", outside ", free_from, "..",
                                 bytes.size());
        if (offset % wire_alignment != 0)
            return parse_failure("MEP", Parse_error::bad_alignment, "slot ", i, " at offset ", offset, ", not a multiple of ",
                                 wire_alignment);
        free_from = offset + 1;
    }
    view = candidate;
    return {};
}

std::span<const std::byte> mfp_in_slot(std::span<const std::byte> slot) {
    if (slot.size() < sizeof(Mfp_header)) return slot;
    const std::uint64_t total = load<Mfp_header>(slot, 0).total_bytes;
    // Only the padding may follow the MFP; anything else is the parser's to reject.
    return total <= slot.size() && align_up(total) == slot.size() ? slot.first(total) : slot;
}

Parse_status parse_mep(std::span<const std::byte> bytes, Mep_view& view, Stream_map& streams) {
    Mep_view candidate;
    if (Parse_status status = parse_mep_frame(bytes, candidate); !status.ok()) return status;
    Stream_map map;
    if (Parse_status status = parse_stream_map(candidate.stream_map(), candidate.header.source_count, map); !status.ok())
        return status;
    std::optional<std::uint32_t> previous_source;
    for (std::uint32_t i = 0; i < candidate.header.source_count; ++i) {
        Mfp_view mfp;
        const Mfp_expectation expected{std::nullopt, candidate.header.first_event_id, candidate.header.event_count};
        if (Parse_status status = parse_mfp(mfp_in_slot(candidate.slot(i)), expected, mfp); !status.ok()) {
            status.detail = "MEP slot " + std::to_string(i) + ": " + status.detail;
            return status;
        }
        if (previous_source && mfp.header.source_id <= *previous_source)
            return parse_failure("MEP", Parse_error::wrong_source, "slot ", i, " holds source ", mfp.header.source_id,
                                 ", not after source ", *previous_source, " of the slot before");
        previous_source = mfp.header.source_id;
    }
    view = candidate;
    streams = std::move(map);
    return {};
}

}  // namespace eb
