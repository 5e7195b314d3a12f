// Any bytes as a MEP: the full parser and the consumer's event-by-event
// checker must both cope. The checker expects the seeds' shape (seeds.cpp).
#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/mep_checker.hpp"
#include "formats/mep_parser.hpp"
#include "seed_streams.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto bytes = std::as_bytes(std::span(data, size));
    eb::Mep_view view;
    eb::Stream_map streams;
    if (eb::parse_mep(bytes, view, streams).ok())
        for (std::uint32_t slot = 0; slot < view.header.source_count; ++slot) (void)eb::mfp_in_slot(view.slot(slot));

    static eb::Parse_error_counts errors;
    static eb::Mep_checker checker({0, 1, 2}, 4, {eb::Size_model::poisson, 20}, errors, eb::seed_stream_map());
    const eb::Mep_verdict verdict = checker.check(bytes);
    // Every event is counted once, whatever the damage.
    if (verdict.events_complete + verdict.events_incomplete != 4) __builtin_trap();
    return 0;
}
