#include "mfp.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "payload.hpp"
#include "wire_format.hpp"

namespace eb {
namespace {

TEST(Mfp, SizesIncludeHeadersAndAlignment) {
    struct Case {
        std::uint32_t fragments, payload_bytes;
        std::uint64_t stride, total;
    };
    const Case cases[] = {
        {0, 128, 144, 32},
        {1, 0, 16, 48},
        {1, 1, 24, 56},
        {1, 8, 24, 56},
        {1, 9, 32, 64},
        {3, 130, 152, 32 + 3 * 152},
        {1000, 128, 144, 32 + 1000 * 144},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(testing::Message() << c.fragments << " x " << c.payload_bytes << " B");
        EXPECT_EQ(fragment_stride(c.payload_bytes), c.stride);
        EXPECT_EQ(mfp_bytes(c.fragments, c.payload_bytes), c.total);
    }
}

TEST(Mfp, WritesHeaderFragmentsPayloadAndZeroPadding) {
    const Mfp_spec spec{.source_id = 7, .first_event_id = 5000, .fragment_count = 3, .payload_bytes = 13};
    std::vector<std::byte> mfp(mfp_bytes(3, 13), std::byte{0xAA});
    write_mfp(mfp, spec);

    const auto header = load<Mfp_header>(mfp, 0);
    EXPECT_EQ(header.magic, mfp_magic);
    EXPECT_EQ(header.version, wire_version);
    EXPECT_EQ(header.fragment_count, 3u);
    EXPECT_EQ(header.first_event_id, 5000u);
    EXPECT_EQ(header.total_bytes, mfp.size());
    EXPECT_EQ(header.source_id, 7u);
    for (std::uint32_t i = 0; i < 3; ++i) {
        const std::size_t at = sizeof(Mfp_header) + i * fragment_stride(13);
        const auto fragment = load<Fragment_header>(mfp, at);
        EXPECT_EQ(fragment.event_id, 5000u + i);
        EXPECT_EQ(fragment.source_id, 7u);
        EXPECT_EQ(fragment.size, 13u);
        EXPECT_TRUE(payload_matches(std::span(mfp).subspan(at + sizeof(Fragment_header), 13), 7, 5000 + i));
        for (std::size_t pad = at + sizeof(Fragment_header) + 13; pad < at + fragment_stride(13); ++pad)
            EXPECT_EQ(mfp[pad], std::byte{0}) << "padding byte " << pad;
    }
}

TEST(Mfp, RefusesABufferOfTheWrongSize) {
    std::vector<std::byte> mfp(mfp_bytes(2, 16) + 1);
    EXPECT_THROW(write_mfp(mfp, {.source_id = 0, .first_event_id = 0, .fragment_count = 2, .payload_bytes = 16}),
                 std::invalid_argument);
}

}  // namespace
}  // namespace eb
