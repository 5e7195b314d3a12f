// Any bytes as an MFP: the parser must reject or accept without a crash,
// overflow or undefined behaviour, and an accepted MFP must be walkable.
#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/mfp_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto bytes = std::as_bytes(std::span(data, size));
    eb::Mfp_view view;
    if (!eb::parse_mfp(bytes, view).ok()) return 0;
    std::uint64_t payload_bytes = 0;
    eb::for_each_fragment(view, [&](std::uint32_t, std::uint8_t, std::span<const std::byte> payload) {
        // Touch both ends so ASan sees any payload outside the input.
        if (!payload.empty()) payload_bytes += std::to_integer<unsigned>(payload.front()) +
                                               std::to_integer<unsigned>(payload.back());
    });
    eb::parse_mfp(bytes, {view.header.source_id, view.header.first_event_id, view.header.fragment_count}, view);
    return payload_bytes == 0xFFFFFFFFFFFFFFFF ? 1 : 0;
}
