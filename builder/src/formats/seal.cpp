#include "formats/seal.hpp"

#include <zlib.h>

#include "formats/wire_format.hpp"

namespace eb {
namespace {

std::uint32_t crc_of(std::span<const std::byte> bytes) {
    return static_cast<std::uint32_t>(
        ::crc32_z(::crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

}  // namespace

void seal(std::span<std::byte> message) {
    const std::size_t body = message.size() - seal_bytes;
    store(message, body, crc_of(message.first(body)));
}

bool is_sealed(std::span<const std::byte> message) {
    if (message.size() < seal_bytes) return false;
    const std::size_t body = message.size() - seal_bytes;
    return load<std::uint32_t>(message, body) == crc_of(message.first(body));
}

}  // namespace eb
