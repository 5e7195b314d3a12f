#include "formats/mfp_parser.hpp"

namespace eb {

Parse_status parse_mfp(std::span<const std::byte> bytes, Mfp_view& view) {
    if (bytes.size() < sizeof(Mfp_header))
        return parse_failure("MFP", Parse_error::truncated, bytes.size(), " bytes, shorter than the ", sizeof(Mfp_header),
                             "-byte header");
    const auto header = load<Mfp_header>(bytes, 0);
    if (header.magic != mfp_magic)
        return parse_failure("MFP", Parse_error::bad_magic, "magic 0x", std::hex, header.magic, ", expected 0x", mfp_magic);
    if (header.version != mfp_version)
        return parse_failure("MFP", Parse_error::bad_version, "version ", header.version, ", this reader knows ", mfp_version);
    if (header.align_log2 > max_mfp_align_log2)
        return parse_failure("MFP", Parse_error::bad_alignment, "align_log2 ", int{header.align_log2}, ", at most ",
                             int{max_mfp_align_log2});
    if (header.total_bytes != bytes.size())
        return parse_failure("MFP", Parse_error::size_mismatch, "header says ", header.total_bytes, " bytes, the packet has ",
                             bytes.size());

    // All arithmetic below stays far from overflow: counts are u32, sizes u16.
    const std::uint64_t alignment = std::uint64_t{1} << header.align_log2;
    const auto align = [&](std::uint64_t at) { return (at + alignment - 1) & ~(alignment - 1); };
    const std::uint64_t tables_end = sizeof(Mfp_header) + std::uint64_t{header.fragment_count} * 3;
    if (tables_end > bytes.size())
        return parse_failure("MFP", Parse_error::truncated, header.fragment_count, " fragments need ", tables_end,
                             " bytes of header and tables, the packet has ", bytes.size());
    Mfp_view candidate{header, bytes};
    std::uint64_t at = align(tables_end);
    for (std::uint32_t i = 0; i < header.fragment_count; ++i) {
        const std::uint64_t end = at + candidate.size(i);
        if (end > bytes.size())
            return parse_failure("MFP", Parse_error::fragment_overflow, "fragment ", i, " of ", candidate.size(i), " bytes at offset ",
                                 at, " runs past the packet end at ", bytes.size());
        at = align(end);
    }
    if (at < bytes.size())
        return parse_failure("MFP", Parse_error::trailing_bytes, bytes.size() - at, " bytes after the last fragment");
    if (at > bytes.size())
        return parse_failure("MFP", Parse_error::truncated, "the last fragment's padding ends at ", at, ", past the packet end at ",
                             bytes.size());
    view = candidate;
    return {};
}

Parse_status parse_mfp(std::span<const std::byte> bytes, const Mfp_expectation& expected, Mfp_view& view) {
    Mfp_view candidate;
    if (Parse_status status = parse_mfp(bytes, candidate); !status.ok()) return status;
    const Mfp_header& header = candidate.header;
    if (expected.source_id && header.source_id != *expected.source_id)
        return parse_failure("MFP", Parse_error::wrong_source, "source ", header.source_id, ", expected ", *expected.source_id);
    if (header.fragment_count != expected.fragment_count)
        return parse_failure("MFP", Parse_error::wrong_fragment_count, header.fragment_count, " fragments, expected ",
                             expected.fragment_count, " (the packing factor)");
    if (header.first_event_id != expected.first_event_id)
        return parse_failure("MFP", Parse_error::wrong_event_range, "source ", header.source_id, " events from ",
                             header.first_event_id, ", expected from ", expected.first_event_id);
    view = candidate;
    return {};
}

}  // namespace eb
