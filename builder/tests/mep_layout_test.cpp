#include "mep_layout.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "wire_format.hpp"

namespace eb {
namespace {

TEST(MepLayout, PlacesMfpsAlignedAfterTheOffsetsTable) {
    struct Case {
        std::vector<std::uint64_t> mfp_sizes;
        Mep_layout expected;
    };
    const Case cases[] = {
        {{}, {{}, 32}},
        {{32}, {{40}, 72}},
        {{33, 40}, {{48, 88}, 128}},  // 33 B padded to 40
        {{1, 1, 1}, {{56, 64, 72}, 80}},
        {{144032, 144032, 144032, 144032}, {{64, 144096, 288128, 432160}, 576192}},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(testing::Message() << c.mfp_sizes.size() << " sources");
        EXPECT_EQ(mep_header_bytes(c.mfp_sizes.size()), 32 + 8 * c.mfp_sizes.size());
        EXPECT_EQ(mep_layout(c.mfp_sizes), c.expected);
    }
}

TEST(MepLayout, HeaderRecordsEventsSourcesAndOffsets) {
    const std::uint64_t sizes[] = {100, 60, 8};
    const Mep_layout layout = mep_layout(sizes);
    std::vector<std::byte> mep(layout.total_bytes);
    write_mep_header(mep, layout, 42000, 1000, 7);

    const auto header = load<Mep_header>(mep, 0);
    EXPECT_EQ(header.magic, mep_magic);
    EXPECT_EQ(header.version, wire_version);
    EXPECT_EQ(header.source_count, 3u);
    EXPECT_EQ(header.event_count, 1000u);
    EXPECT_EQ(header.epoch, 7u);
    EXPECT_EQ(header.first_event_id, 42000u);
    EXPECT_EQ(header.total_bytes, mep.size());
    for (std::size_t s = 0; s < 3; ++s)
        EXPECT_EQ(load<std::uint64_t>(mep, sizeof(Mep_header) + 8 * s), layout.offsets[s]);
}

TEST(MepLayout, HeaderRefusesABufferOfTheWrongSize) {
    const std::uint64_t sizes[] = {100};
    const Mep_layout layout = mep_layout(sizes);
    std::vector<std::byte> mep(layout.total_bytes - 1);
    EXPECT_THROW(write_mep_header(mep, layout, 0, 1, 1), std::invalid_argument);
}

}  // namespace
}  // namespace eb
