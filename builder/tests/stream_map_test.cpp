#include "formats/stream_map.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "buffers/mep_expectation.hpp"
#include "schedule/rank_table.hpp"
#include "buffers/shm_text.hpp"
#include "base/stream_name.hpp"

namespace eb {
namespace {

std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
    std::vector<std::byte> bytes;
    for (const int value : values) bytes.push_back(static_cast<std::byte>(value));
    return bytes;
}

TEST(StreamName, FollowsTheFabricsPattern) {
    for (const char* good : {"a", "w1-velo0", "eb0-tell40-0a", "ut:1/a_b.c", "0"}) EXPECT_TRUE(valid_stream_name(good)) << good;
    for (const char* bad : {"", "-a", ".a", "a b", "a,b", "a=b", "é"}) EXPECT_FALSE(valid_stream_name(bad)) << bad;
    EXPECT_TRUE(valid_stream_name(std::string(128, 'a')));
    EXPECT_FALSE(valid_stream_name(std::string(129, 'a')));
}

TEST(StreamMap, EncodesListsPerSlotThenTheLackedOnesPaddedTo8) {
    const Stream_map map{{{"ab"}, {}}, {"c"}};
    // slot 0: count 1, "ab"; slot 1: count 0; lacked: count 1, "c"; 3 bytes of padding.
    EXPECT_EQ(encode_stream_map(map), bytes_of({1, 0, 2, 'a', 'b', 0, 0, 1, 0, 1, 'c', 0, 0, 0, 0, 0}));
    EXPECT_EQ(encode_stream_map({{{}, {}, {}}, {}}), bytes_of({0, 0, 0, 0, 0, 0, 0, 0})) << "no streams named: empty lists";
    EXPECT_THROW(encode_stream_map({{{"a b"}}, {}}), std::invalid_argument);

    Stream_map read;
    ASSERT_TRUE(parse_stream_map(encode_stream_map(map), 2, read).ok());
    EXPECT_EQ(read, map);
    EXPECT_EQ(describe_stream_map(map), "1 streams held, lacks c");
    EXPECT_EQ(describe_stream_map({{{}, {}}, {}}), "no streams named");
}

TEST(StreamMap, ParsingRefusesWhatNoBuWrites) {
    struct Case {
        const char* name;
        std::vector<std::byte> bytes;
        std::uint32_t slots;
        const char* detail;
    };
    const Case cases[] = {
        {"empty", {}, 1, "0 bytes cannot hold the 2 lists of 1 slots"},
        {"a hostile slot count, refused before allocating", bytes_of({0, 0, 0, 0, 0, 0, 0, 0}), 4'000'000'000u,
         "8 bytes cannot hold the 4000000001 lists"},
        {"count past the end", bytes_of({5, 0, 1, 'a', 1, 'b', 1, 'c'}), 1, "slot 0: a name at byte 8 runs past"},
        {"name past the end", bytes_of({1, 0, 9, 'a', 0, 0, 0, 0}), 1, "slot 0: a name at byte 2 runs past"},
        {"empty name", bytes_of({1, 0, 0, 0, 0, 0, 0, 0}), 1, "slot 0: the name at byte 2 is not a stream name"},
        {"bad character", bytes_of({1, 0, 1, ' ', 0, 0, 0, 0}), 1, "the name at byte 2 is not a stream name"},
        {"twice", bytes_of({1, 0, 1, 'a', 1, 0, 1, 'a'}), 1, "lacked streams: stream 'a' is listed twice"},
        {"no lacked list", bytes_of({0, 0, 1, 0, 3, 'a', 'b', 'c'}), 2, "lacked streams: a count at byte 8 runs past"},
        {"more than padding", bytes_of({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), 1,
         "12 bytes follow the lists, more than the padding"},
        {"padding not zero", bytes_of({0, 0, 0, 0, 0, 7, 0, 0}), 1, "padding byte 5 is not 0"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        Stream_map map;
        const Parse_status status = parse_stream_map(c.bytes, c.slots, map);
        EXPECT_EQ(status.error, Parse_error::bad_stream_map);
        EXPECT_NE(status.detail.find(c.detail), std::string::npos) << status.detail;
    }
}

// What a BU publishes beside its ring for an epoch is what its consumer
// reads back, the stream map included.
TEST(MepExpectation, CarriesTheStreamMap) {
    const std::string ring = "/eb-test" + std::to_string(::getpid()) + "-0-mep";
    const Mep_expectation published{3, 200, {0, 2, 5}, {{{"velo-0a", "velo-0b"}, {}, {"ut:5"}}, {"lost-1"}}};
    publish_mep_expectation(ring, published);
    const auto read = read_mep_expectation(ring, 3);
    remove_mep_expectation(ring, 3);
    ASSERT_TRUE(read.has_value());
    EXPECT_EQ(*read, published);
    EXPECT_FALSE(read_mep_expectation(ring, 3).has_value()) << "removed";

    // A file no BU writes is refused naming it, not taken for a map no MEP can match.
    for (const char* text : {"epoch 3 stride 200 sources 0\nheld 0 a a\nlacked\n", "epoch 3 stride 200 sources 0\nheld 0 a,b\nlacked\n",
                             "epoch 3 stride 200 sources 0\nheld 1 a\nlacked\n", "epoch 3 stride 200 sources 0\nheld 0 a\n"}) {
        write_shm_text(mep_expectation_name(ring, 3), text);
        EXPECT_THROW(read_mep_expectation(ring, 3), std::runtime_error) << text;
    }
    remove_mep_expectation(ring, 3);
}

TEST(RankTable, OnlyRusReadStreams) {
    using enum Rank_function;
    const Rank_table table({ru_bu, bu, dummy}, {1}, {{{"a"}, {}, {}}, {"b"}});
    EXPECT_EQ(table.streams(0), std::vector<std::string>{"a"});
    EXPECT_TRUE(table.streams(1).empty());
    EXPECT_EQ(table.unread_streams(), std::vector<std::string>{"b"});
    EXPECT_TRUE(Rank_table({ru_bu}).streams(0).empty()) << "a table without named streams";
    EXPECT_THROW(Rank_table({ru_bu, bu}, {}, {{{}, {"x"}}, {}}), std::invalid_argument) << "a BU reads none";
    EXPECT_THROW(Rank_table({ru_bu, bu}, {}, {{{"a"}}, {}}), std::invalid_argument) << "a list per rank";
}

}  // namespace
}  // namespace eb
