#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace eb {

// Control messages end with a CRC-32 (zlib's) of the bytes before it. A
// message changed on the way (a faulty link or middlebox; TCP's own
// checksum is weak) is then a broken link to its sender, never a size read
// wrong that would put the streams out of step.
inline constexpr std::size_t seal_bytes = 4;
void seal(std::span<std::byte> message);             // writes the last seal_bytes
bool is_sealed(std::span<const std::byte> message);  // whether they match the rest

}  // namespace eb
