#include "formats/payload.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace eb {
namespace {

// Past 64 bytes (one AVX-512 step of the vectorised loops) and its remainders.
constexpr std::size_t largest_size = 200;

TEST(Payload, MatchesWhatWasFilledForEverySize) {
    for (std::size_t size = 0; size <= largest_size; ++size) {
        std::vector<std::byte> payload(size);
        fill_payload(payload, 3, 12345);
        EXPECT_TRUE(payload_matches(payload, 3, 12345)) << size << " bytes";
    }
}

TEST(Payload, AnyChangedByteIsDetected) {
    for (std::size_t size = 1; size <= largest_size; ++size) {
        std::vector<std::byte> payload(size);
        fill_payload(payload, 3, 12345);
        for (std::size_t i = 0; i < size; ++i) {
            payload[i] ^= std::byte{0x01};
            EXPECT_FALSE(payload_matches(payload, 3, 12345)) << "byte " << i << " of " << size;
            payload[i] ^= std::byte{0x01};
        }
    }
}

// The bytes are the wire format (files replayed, consumers of other builds):
// word m is seed + m * 0x9E3779B97F4A7C15, little-endian, whichever code
// path (scalar, AVX2, AVX-512) wrote it.
TEST(Payload, IsTheSameByteStreamOnEveryCodePath) {
    std::vector<std::byte> payload(largest_size);
    fill_payload(payload, 3, 12345);
    std::uint64_t word = 0x1f8cbc236da6cc37;  // the seed of (source 3, event 12345)
    for (std::size_t at = 0; at < payload.size(); at += sizeof word, word += 0x9E3779B97F4A7C15) {
        std::uint64_t got = 0;
        std::memcpy(&got, payload.data() + at, std::min(sizeof got, payload.size() - at));
        std::uint64_t expected = 0;
        std::memcpy(&expected, &word, std::min(sizeof word, payload.size() - at));
        ASSERT_EQ(got, expected) << "word at byte " << at;
    }
}

TEST(Payload, DiffersBetweenFragments) {
    std::vector<std::byte> payload(128);
    fill_payload(payload, 3, 12345);
    EXPECT_FALSE(payload_matches(payload, 3, 12346)) << "next event";
    EXPECT_FALSE(payload_matches(payload, 4, 12345)) << "next source";
    EXPECT_FALSE(payload_matches(std::span(payload).subspan(8), 3, 12345)) << "shifted by a word";
}

}  // namespace
}  // namespace eb
