#include "buffers/generator_reader.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "formats/mfp_parser.hpp"
#include "formats/payload.hpp"

namespace eb {
namespace {

TEST(GeneratorReader, MfpKHoldsEventsOfChunkK) {
    for (const Size_model kind : {Size_model::fixed, Size_model::poisson}) {
        const Event_model model{kind, 133};
        const Fragment_sizes size_of(model, 5);
        Generator_reader source(/*source_id=*/5, /*packing_factor=*/100, model, /*depth=*/2);
        for (std::uint64_t k = 0; k < 6; ++k) {
            Mfp_view mfp;
            const Parse_status status = parse_mfp(source.next(), {5, k * 100, 100}, mfp);
            ASSERT_TRUE(status.ok()) << status.detail;
            for_each_fragment(mfp, [&](std::uint32_t i, std::uint8_t type, std::span<const std::byte> payload) {
                EXPECT_EQ(type, fragment_type(5));
                EXPECT_EQ(payload.size(), size_of(k * 100 + i));
                EXPECT_TRUE(payload_matches(payload, 5, k * 100 + i));
            });
            source.release();
        }
    }
}

TEST(GeneratorReader, HeldMfpsStayIntactUntilReleased) {
    Generator_reader source(0, 10, {Size_model::fixed, 8}, 3);
    const auto first = source.next();
    source.next();
    source.next();
    EXPECT_THROW(source.next(), std::logic_error) << "all three slots are held";
    EXPECT_EQ(load<Mfp_header>(first, 0).first_event_id, 0u);
    source.release();
    EXPECT_EQ(load<Mfp_header>(source.next(), 0).first_event_id, 30u) << "reuses the released slot";
}

TEST(GeneratorReader, ReleaseWithoutHeldMfpIsAnError) {
    Generator_reader source(0, 10, {Size_model::fixed, 8}, 1);
    EXPECT_THROW(source.release(), std::logic_error);
}

}  // namespace
}  // namespace eb
