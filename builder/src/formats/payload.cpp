#include "formats/payload.hpp"

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
// m = 0, 1, ...: one add per 8 bytes to generate or to check. Counted loops
// over whole words vectorise (SSE2; AVX2 or AVX-512 where the CPU has them,
// chosen when the program loads): the generator and the checker touch every
// byte of every event.
// Not under ThreadSanitizer: the clones' resolver runs at load time, before
// its runtime is up, and crashes.
#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define EB_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define EB_VECTOR_CLONES
#endif

EB_VECTOR_CLONES void fill_payload(std::span<std::byte> out, std::uint32_t source_id, std::uint64_t event_id) {
    const std::size_t words = out.size() / sizeof(std::uint64_t);
    std::byte* const data = out.data();
    const std::uint64_t first = seed(source_id, event_id);
    // The loop's word is not used after it (the tail's is computed anew), or
    // the compiler keeps it scalar.
    std::uint64_t word = first;
    for (std::size_t m = 0; m < words; ++m, word += golden_gamma)
        std::memcpy(data + m * sizeof word, &word, sizeof word);
    if (const std::size_t tail = out.size() % sizeof word; tail != 0) {
        const std::uint64_t last = first + words * golden_gamma;
        std::memcpy(data + words * sizeof last, &last, tail);
    }
}

EB_VECTOR_CLONES bool payload_matches(std::span<const std::byte> payload, std::uint32_t source_id,
                                      std::uint64_t event_id) {
    const std::size_t words = payload.size() / sizeof(std::uint64_t);
    const std::byte* const data = payload.data();
    const std::uint64_t first = seed(source_id, event_id);
    std::uint64_t word = first;
    std::uint64_t differences = 0;  // accumulated, not branched on
    for (std::size_t m = 0; m < words; ++m, word += golden_gamma) {
        std::uint64_t got;
        std::memcpy(&got, data + m * sizeof got, sizeof got);
        differences |= got ^ word;
    }
    const std::size_t tail = payload.size() % sizeof word;
    if (differences != 0 || tail == 0) return differences == 0;
    const std::uint64_t last = first + words * golden_gamma;
    return std::memcmp(data + words * sizeof last, &last, tail) == 0;
}

}  // namespace eb
