#pragma once

#include <cstddef>
#include <cstdint>

#include "base/rank.hpp"

namespace eb {

// Linear shifting (reference design, section II-A). A cycle has one phase per
// unit; in phase n, RU i sends to BU (i + n) mod N, so every phase pairs each
// RU with a distinct BU and no BU is over-subscribed.

constexpr Rank send_target(Rank ru, Rank phase, Rank units) { return (ru + phase) % units; }

// The RU that sends to `bu` in `phase`: the inverse of send_target.
constexpr Rank receive_source(Rank bu, Rank phase, Rank units) {
    return (bu + units - phase) % units;
}

// The phase in which `bu` receives from `ru`.
constexpr Rank receive_phase(Rank bu, Rank ru, Rank units) { return (bu + units - ru) % units; }

// MFP chunk c (MFP c of every source) is built on the live BU of index
// c mod B among the B live BUs, and cycle k moves chunks [kB, kB + B), so the
// BU of index j builds chunk kB + j in cycle k.
constexpr std::uint64_t chunk_for(std::uint64_t cycle, std::size_t bu_index, std::size_t bu_count) {
    return cycle * bu_count + bu_index;
}

// Cycles needed for a unit to build at least `events` events, one MEP of
// `packing_factor` events per cycle; 0 events means no limit (0 cycles).
constexpr std::uint64_t cycles_for_events(std::uint64_t events, std::uint32_t packing_factor) {
    return events / packing_factor + (events % packing_factor != 0 ? 1 : 0);
}

}  // namespace eb
