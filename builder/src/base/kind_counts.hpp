#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace eb {

// Counts by kind (an enum of `kinds` values from 0): written by one thread,
// read by any (relaxed: each count is exact, the set is not one snapshot).
template <class Kind, std::size_t kinds>
class Kind_counts {
public:
    void add(Kind kind) { counts_[static_cast<std::size_t>(kind)].fetch_add(1, std::memory_order_relaxed); }
    std::uint64_t get(Kind kind) const { return counts_[static_cast<std::size_t>(kind)].load(std::memory_order_relaxed); }

private:
    std::array<std::atomic<std::uint64_t>, kinds> counts_{};
};

}  // namespace eb
