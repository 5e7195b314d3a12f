#include "formats/seal.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace eb {
namespace {

TEST(Seal, AnyChangedByteBreaksIt) {
    std::vector<std::byte> message(45);
    for (std::size_t i = 0; i < message.size(); ++i) message[i] = std::byte(i * 13);
    seal(message);
    EXPECT_TRUE(is_sealed(message));
    for (std::size_t at = 0; at < message.size(); ++at)
        for (const std::byte flip : {std::byte{0x01}, std::byte{0x80}}) {
            std::vector<std::byte> changed = message;
            changed[at] ^= flip;
            EXPECT_FALSE(is_sealed(changed)) << "byte " << at;
        }
    EXPECT_FALSE(is_sealed(std::span(message).first(3))) << "shorter than a seal";
}

}  // namespace
}  // namespace eb
