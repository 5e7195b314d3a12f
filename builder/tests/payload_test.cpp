#include "payload.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace eb {
namespace {

TEST(Payload, MatchesWhatWasFilledForEverySize) {
    for (std::size_t size = 0; size <= 41; ++size) {
        std::vector<std::byte> payload(size);
        fill_payload(payload, 3, 12345);
        EXPECT_TRUE(payload_matches(payload, 3, 12345)) << size << " bytes";
    }
}

TEST(Payload, AnyChangedByteIsDetected) {
    for (std::size_t size = 1; size <= 41; ++size) {
        std::vector<std::byte> payload(size);
        fill_payload(payload, 3, 12345);
        for (std::size_t i = 0; i < size; ++i) {
            payload[i] ^= std::byte{0x01};
            EXPECT_FALSE(payload_matches(payload, 3, 12345)) << "byte " << i << " of " << size;
            payload[i] ^= std::byte{0x01};
        }
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
