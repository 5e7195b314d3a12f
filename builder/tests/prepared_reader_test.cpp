#include "buffers/prepared_reader.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "formats/mfp_parser.hpp"
#include "formats/wire_format.hpp"

namespace eb {
namespace {

// Every MFP it hands out passes the RU's checks for its chunk, from the same
// few slots, which never move: the data mover's source at no cost.
TEST(PreparedReader, HandsOutItsSlotsAgainStampedForEachChunk) {
    for (const Size_model kind : {Size_model::fixed, Size_model::poisson}) {
        Prepared_reader source(/*source_id=*/3, /*packing_factor=*/100, {kind, 133}, /*depth=*/2);
        const std::uint64_t version = source.regions().version();
        ASSERT_EQ(source.regions().spans().size(), 2u);
        std::vector<const std::byte*> seen;
        for (std::uint64_t k = 0; k < 6; ++k) {
            const std::span<const std::byte> bytes = source.next();
            Mfp_view mfp;
            const Parse_status status = parse_mfp(bytes, {3, k * 100, 100}, mfp);
            ASSERT_TRUE(status.ok()) << status.detail;
            EXPECT_EQ(bytes.data(), source.regions().spans()[k % 2].data()) << "chunk " << k;
            source.release();
        }
        EXPECT_EQ(source.regions().version(), version) << "registered once, never again";
    }
}

TEST(PreparedReader, SkipsToAJoinedSetsChunkAndHoldsAtMostItsDepth) {
    Prepared_reader source(0, 10, {Size_model::fixed, 8}, 2);
    source.skip_to(70);
    EXPECT_EQ(load<Mfp_header>(source.next(), 0).first_event_id, 70u);
    EXPECT_EQ(load<Mfp_header>(source.next(), 0).first_event_id, 80u);
    EXPECT_THROW(source.next(), std::logic_error) << "both slots are held";
    EXPECT_THROW(source.skip_to(100), std::logic_error) << "skipping with MFPs held";
    source.release();
    source.release();
    EXPECT_THROW(source.release(), std::logic_error);
}

}  // namespace
}  // namespace eb
