#pragma once

#include <cstdint>
#include <span>

namespace eb {

// What a unit asks of the running set in a cycle's header (docs/control-api.md).
struct Vote {
    std::uint32_t pending_epoch = 0;  // newest rank table it holds
    bool pause = false;
    bool stop = false;
};

// What the whole set does at the end of a cycle. Every unit computes it from
// the votes of the same units (every live unit it did not lose), so all of
// them take the same decision at the same phase boundary.
struct Cycle_decision {
    std::uint32_t switch_to = 0;  // 0: keep the table
    bool pause = false;
    bool stop = false;

    friend bool operator==(const Cycle_decision&, const Cycle_decision&) = default;
};

// Pause and stop: any unit's vote carries the set (the operator asks them
// all; a person may ask one). A table switch waits until every unit holds
// it: the set moves to the oldest table newer than `epoch` that all hold.
Cycle_decision decide(std::span<const Vote> votes, std::uint32_t epoch);

}  // namespace eb
