#include "generator_reader.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "mfp.hpp"
#include "wire_format.hpp"

namespace eb {
namespace {

TEST(GeneratorReader, MfpKHoldsEventsOfChunkK) {
    Generator_reader source(/*source_id=*/5, /*packing_factor=*/100, /*fragment_size=*/32, /*depth=*/2);
    for (std::uint64_t k = 0; k < 6; ++k) {
        const auto mfp = source.next();
        ASSERT_EQ(mfp.size(), mfp_bytes(100, 32));
        const auto header = load<Mfp_header>(mfp, 0);
        EXPECT_EQ(header.source_id, 5u);
        EXPECT_EQ(header.first_event_id, k * 100);
        EXPECT_EQ(header.fragment_count, 100u);
        const auto last = load<Fragment_header>(mfp, sizeof(Mfp_header) + 99 * fragment_stride(32));
        EXPECT_EQ(last.event_id, k * 100 + 99);
        source.release();
    }
}

TEST(GeneratorReader, HeldMfpsStayIntactUntilReleased) {
    Generator_reader source(0, 10, 8, 3);
    const auto first = source.next();
    source.next();
    source.next();
    EXPECT_THROW(source.next(), std::logic_error) << "all three slots are held";
    EXPECT_EQ(load<Mfp_header>(first, 0).first_event_id, 0u);
    source.release();
    EXPECT_EQ(load<Mfp_header>(source.next(), 0).first_event_id, 30u) << "reuses the released slot";
}

TEST(GeneratorReader, ReleaseWithoutHeldMfpIsAnError) {
    Generator_reader source(0, 10, 8, 1);
    EXPECT_THROW(source.release(), std::logic_error);
}

}  // namespace
}  // namespace eb
