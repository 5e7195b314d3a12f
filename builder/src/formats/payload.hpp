#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace eb {

// Deterministic fragment payload: a function of (source id, event id) only, so
// the consumer can check every byte without knowing how the data travelled.
// It differs between any two fragments, so misplaced or shifted data is caught.

void fill_payload(std::span<std::byte> out, std::uint32_t source_id, std::uint64_t event_id);

bool payload_matches(std::span<const std::byte> payload, std::uint32_t source_id,
                     std::uint64_t event_id);

}  // namespace eb
