#include "payload.hpp"

#include <cstring>

namespace eb {
namespace {

constexpr std::uint64_t golden_gamma = 0x9E3779B97F4A7C15ull;

// splitmix64 finaliser: a bijection, so distinct inputs give distinct seeds.
constexpr std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

// Unique per fragment while event ids stay below 2^40.
constexpr std::uint64_t seed(std::uint32_t source_id, std::uint64_t event_id) {
    return mix(event_id ^ (std::uint64_t{source_id} << 40));
}

}  // namespace

// The payload is the little-endian byte stream of the words seed + m * gamma,
// m = 0, 1, ...: one add per 8 bytes to generate or to check.
void fill_payload(std::span<std::byte> out, std::uint32_t source_id, std::uint64_t event_id) {
    std::uint64_t word = seed(source_id, event_id);
    std::size_t at = 0;
    for (; at + sizeof word <= out.size(); at += sizeof word, word += golden_gamma)
        std::memcpy(out.data() + at, &word, sizeof word);
    if (const std::size_t tail = out.size() - at; tail != 0) std::memcpy(out.data() + at, &word, tail);
}

bool payload_matches(std::span<const std::byte> payload, std::uint32_t source_id,
                     std::uint64_t event_id) {
    std::uint64_t word = seed(source_id, event_id);
    std::uint64_t differences = 0;  // accumulated, not branched on, so the loop vectorises
    std::size_t at = 0;
    for (; at + sizeof word <= payload.size(); at += sizeof word, word += golden_gamma) {
        std::uint64_t got;
        std::memcpy(&got, payload.data() + at, sizeof got);
        differences |= got ^ word;
    }
    const std::size_t tail = payload.size() - at;
    return differences == 0 && (tail == 0 || std::memcmp(payload.data() + at, &word, tail) == 0);
}

}  // namespace eb
