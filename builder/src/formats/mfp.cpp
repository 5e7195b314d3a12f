#include "formats/mfp.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>

#include "formats/payload.hpp"
#include "formats/wire_format.hpp"

namespace eb {

std::uint64_t mfp_payload_start(std::uint32_t fragment_count) {
    return align_up(sizeof(Mfp_header) + std::uint64_t{fragment_count} * (sizeof(std::uint8_t) + sizeof(std::uint16_t)));
}

std::uint64_t mfp_bytes(std::span<const std::uint16_t> sizes) {
    std::uint64_t at = mfp_payload_start(static_cast<std::uint32_t>(sizes.size()));
    for (const std::uint16_t size : sizes) at = align_up(at + size);
    return at;
}

std::uint64_t mfp_bytes(std::uint32_t fragment_count, std::uint32_t payload_bytes) {
    return mfp_payload_start(fragment_count) + std::uint64_t{fragment_count} * align_up(payload_bytes);
}

namespace {

// Fewer fragments than this per thread are written by one.
constexpr std::uint32_t fragments_per_part = 512;

std::invalid_argument wrong_size() { return std::invalid_argument("write_mfp: buffer size differs from the MFP size"); }

// Payloads and zeroed padding of fragments [begin, end), the first at `at`;
// returns where the next starts. The size is checked as they are written (one
// pass over the sizes, not two): a short buffer is found before a byte past it is.
std::uint64_t write_fragments(std::span<std::byte> out, const Mfp_spec& spec, std::span<const std::uint16_t> sizes,
                              std::uint32_t begin, std::uint32_t end, std::uint64_t at) {
    for (std::uint32_t i = begin; i < end; ++i) {
        const std::uint64_t next = align_up(at + sizes[i]);
        if (next > out.size()) throw wrong_size();
        fill_payload(out.subspan(at, sizes[i]), spec.source_id, spec.first_event_id + i);
        // Zero the padding: every byte on the wire is then defined.
        if (const std::uint64_t padding = next - at - sizes[i]; padding != 0)
            std::memset(out.data() + at + sizes[i], 0, padding);
        at = next;
    }
    return at;
}

}  // namespace

void write_mfp(std::span<std::byte> out, const Mfp_spec& spec, std::span<const std::uint16_t> sizes,
               Data_threads* threads) {
    if (out.size() < mfp_payload_start(static_cast<std::uint32_t>(sizes.size()))) throw wrong_size();
    const auto count = static_cast<std::uint32_t>(sizes.size());
    store(out, 0,
          Mfp_header{.magic = mfp_magic,
                     .version = mfp_version,
                     .fragment_count = count,
                     .first_event_id = spec.first_event_id,
                     .total_bytes = out.size(),
                     .source_id = spec.source_id,
                     .align_log2 = mfp_align_log2,
                     .reserved = {}});
    std::byte* types = out.data() + sizeof(Mfp_header);
    std::memset(types, static_cast<int>(spec.type), count);
    std::memcpy(types + count, sizes.data(), sizes.size_bytes());
    const std::uint64_t tables_end = sizeof(Mfp_header) + std::uint64_t{count} * 3;
    const std::uint64_t payload_start = mfp_payload_start(count);
    std::memset(out.data() + tables_end, 0, payload_start - tables_end);

    const unsigned parts =
        threads == nullptr ? 1 : std::clamp<unsigned>(count / fragments_per_part, 1, threads->size());
    if (parts == 1) {
        if (write_fragments(out, spec, sizes, 0, count, payload_start) != out.size()) throw wrong_size();
        return;
    }
    const auto first_of = [&](unsigned part) { return static_cast<std::uint32_t>(part_start(count, part, parts)); };
    // Where each part's first fragment starts, and the size checked, before
    // any payload is written.
    std::array<std::uint64_t, Data_threads::max_threads> starts{};
    std::uint64_t at = payload_start;
    for (unsigned part = 0; part < parts; ++part) {
        starts[part] = at;
        for (std::uint32_t i = first_of(part); i < first_of(part + 1); ++i) at = align_up(at + sizes[i]);
    }
    if (at != out.size()) throw wrong_size();
    threads->run(parts, [&](unsigned part) {
        write_fragments(out, spec, sizes, first_of(part), first_of(part + 1), starts[part]);
    });
}

}  // namespace eb
