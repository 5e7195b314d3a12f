#include "formats/mep_layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "formats/stream_map.hpp"
#include "formats/wire_format.hpp"

namespace eb {
namespace {

TEST(MepLayout, PlacesMfpsAlignedAfterTheOffsetsTableAndStreamMap) {
    struct Case {
        std::vector<std::uint64_t> mfp_sizes;
        std::uint64_t stream_map_bytes;
        Mep_layout expected;
    };
    const Case cases[] = {
        {{}, 0, {{}, 0, 40}},
        {{32}, 0, {{48}, 0, 80}},
        {{32}, 16, {{64}, 16, 96}},
        {{33, 40}, 8, {{64, 104}, 8, 144}},  // 33 B padded to 40
        {{1, 1, 1}, 8, {{72, 80, 88}, 8, 96}},
        {{144032, 144032, 144032, 144032}, 8, {{80, 144112, 288144, 432176}, 8, 576208}},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(testing::Message() << c.mfp_sizes.size() << " sources");
        EXPECT_EQ(mep_header_bytes(c.mfp_sizes.size(), c.stream_map_bytes),
                  40 + 8 * c.mfp_sizes.size() + c.stream_map_bytes);
        EXPECT_EQ(mep_layout(c.mfp_sizes, c.stream_map_bytes), c.expected);
    }
    EXPECT_THROW(mep_layout(cases[1].mfp_sizes, 12), std::invalid_argument) << "a map is padded to 8";
}

TEST(MepLayout, HeaderRecordsEventsSourcesOffsetsAndStreamMap) {
    const std::uint64_t sizes[] = {100, 60, 8};
    const std::vector<std::byte> streams = encode_stream_map({{{"a"}, {}, {"b", "c"}}, {"d"}});
    const Mep_layout layout = mep_layout(sizes, streams.size());
    std::vector<std::byte> mep(layout.total_bytes);
    write_mep_header(mep, layout, 42000, 1000, 7, streams);

    const auto header = load<Mep_header>(mep, 0);
    EXPECT_EQ(header.magic, mep_magic);
    EXPECT_EQ(header.version, mep_version);
    EXPECT_EQ(header.source_count, 3u);
    EXPECT_EQ(header.event_count, 1000u);
    EXPECT_EQ(header.epoch, 7u);
    EXPECT_EQ(header.first_event_id, 42000u);
    EXPECT_EQ(header.total_bytes, mep.size());
    EXPECT_EQ(header.stream_map_bytes, streams.size());
    EXPECT_EQ(header.reserved, 0u);
    for (std::size_t s = 0; s < 3; ++s)
        EXPECT_EQ(load<std::uint64_t>(mep, sizeof(Mep_header) + 8 * s), layout.offsets[s]);
    EXPECT_TRUE(std::equal(streams.begin(), streams.end(), mep.begin() + sizeof(Mep_header) + 8 * 3));
    EXPECT_THROW(write_mep_header(mep, layout, 42000, 1000, 7, {}), std::invalid_argument) << "the map the layout has room for";
}

TEST(MepLayout, HeaderRefusesABufferOfTheWrongSize) {
    const std::uint64_t sizes[] = {100};
    const Mep_layout layout = mep_layout(sizes, 8);
    std::vector<std::byte> mep(layout.total_bytes - 1);
    EXPECT_THROW(write_mep_header(mep, layout, 0, 1, 1, std::vector<std::byte>(8)), std::invalid_argument);
}

}  // namespace
}  // namespace eb
