#include "formats/mfp.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include <stdexcept>
#include <vector>

#include "formats/mfp_parser.hpp"
#include "formats/payload.hpp"
#include "formats/wire_format.hpp"

namespace eb {
namespace {

TEST(Mfp, SizesIncludeHeaderTablesAndAlignment) {
    struct Case {
        std::vector<std::uint16_t> sizes;
        std::uint64_t payload_start, total;
    };
    const Case cases[] = {
        {{}, 32, 32},
        {{0}, 40, 40},
        {{1}, 40, 48},
        {{8}, 40, 48},
        {{9, 1}, 40, 64},
        {{130, 130, 130}, 48, 48 + 3 * 136},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(testing::Message() << c.sizes.size() << " fragments");
        EXPECT_EQ(mfp_payload_start(static_cast<std::uint32_t>(c.sizes.size())), c.payload_start);
        EXPECT_EQ(mfp_bytes(c.sizes), c.total);
    }
    EXPECT_EQ(mfp_bytes(1000, 128), mfp_bytes(std::vector<std::uint16_t>(1000, 128)));
}

TEST(Mfp, WritesHeaderTablesPayloadsAndZeroPadding) {
    const std::vector<std::uint16_t> sizes = {13, 0, 8};
    std::vector<std::byte> mfp(mfp_bytes(sizes), std::byte{0xAA});
    write_mfp(mfp, {.source_id = 7, .first_event_id = 5000, .type = 2}, sizes);

    Mfp_view view;
    ASSERT_TRUE(parse_mfp(mfp, view).ok());
    EXPECT_EQ(view.header.magic, mfp_magic);
    EXPECT_EQ(view.header.version, mfp_version);
    EXPECT_EQ(view.header.fragment_count, 3u);
    EXPECT_EQ(view.header.first_event_id, 5000u);
    EXPECT_EQ(view.header.total_bytes, mfp.size());
    EXPECT_EQ(view.header.source_id, 7u);
    EXPECT_EQ(view.header.align_log2, mfp_align_log2);
    std::uint32_t seen = 0;
    std::uint64_t at = mfp_payload_start(3);
    for_each_fragment(view, [&](std::uint32_t i, std::uint8_t type, std::span<const std::byte> payload) {
        EXPECT_EQ(i, seen++);
        EXPECT_EQ(type, 2);
        EXPECT_EQ(payload.size(), sizes[i]);
        EXPECT_EQ(payload.data(), mfp.data() + at) << "payloads start aligned, in order";
        EXPECT_TRUE(payload_matches(payload, 7, 5000 + i));
        at = align_up(at + sizes[i]);
    });
    EXPECT_EQ(seen, 3u);
    for (std::size_t pad = mfp_payload_start(3) + 13; pad < mfp_payload_start(3) + 16; ++pad)
        EXPECT_EQ(mfp[pad], std::byte{0}) << "padding byte " << pad;
}

TEST(Mfp, RefusesABufferOfTheWrongSize) {
    const std::vector<std::uint16_t> sizes{16, 13, 16};
    const std::uint64_t right = mfp_bytes(sizes);
    // Longer, short by less than the last fragment, short of the tables.
    for (const std::uint64_t bytes : {right + 1, right + 8, right - 8, right - 24, std::uint64_t{8}}) {
        std::vector<std::byte> buffer(bytes + 64, std::byte{0x5a});
        const std::span<std::byte> mfp = std::span(buffer).first(bytes);
        EXPECT_THROW(write_mfp(mfp, {}, sizes), std::invalid_argument) << bytes << " bytes for an MFP of " << right;
        for (std::size_t at = bytes; at < buffer.size(); ++at)
            ASSERT_EQ(buffer[at], std::byte{0x5a}) << "byte " << at << " past a buffer of " << bytes << " was written";
    }
}

// Written in parts on several threads, an MFP is the same bytes as written
// by one; a buffer of the wrong size is refused before any payload is written.
TEST(Mfp, WrittenInPartsOnThreadsItIsTheSameBytes) {
    Data_threads threads(4, Busy_poll(std::chrono::microseconds(0)));
    std::vector<std::uint16_t> sizes(5000);
    for (std::size_t i = 0; i < sizes.size(); ++i) sizes[i] = static_cast<std::uint16_t>(i % 37 + (i % 5 == 0 ? 0 : 90));
    const Mfp_spec spec{.source_id = 7, .first_event_id = 123456, .type = 3};
    std::vector<std::byte> alone(mfp_bytes(sizes), std::byte{0x5a}), parted(alone.size(), std::byte{0xa5});
    write_mfp(alone, spec, sizes);
    write_mfp(parted, spec, sizes, &threads);
    EXPECT_TRUE(alone == parted);

    std::vector<std::byte> buffer(alone.size() + 64, std::byte{0x5a});
    EXPECT_THROW(write_mfp(std::span(buffer).first(alone.size() - 8), spec, sizes, &threads), std::invalid_argument);
    const std::size_t payloads = mfp_payload_start(static_cast<std::uint32_t>(sizes.size()));
    for (std::size_t at = payloads; at < buffer.size(); ++at)
        ASSERT_EQ(buffer[at], std::byte{0x5a}) << "payload byte " << at << " written to a buffer too short";
}

}  // namespace
}  // namespace eb
