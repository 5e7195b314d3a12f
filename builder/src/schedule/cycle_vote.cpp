#include "schedule/cycle_vote.hpp"

#include <algorithm>
#include <limits>

namespace eb {

Cycle_decision decide(std::span<const Vote> votes, std::uint32_t epoch) {
    Cycle_decision decision;
    std::uint32_t held_by_all = std::numeric_limits<std::uint32_t>::max();
    for (const Vote& vote : votes) {
        decision.pause = decision.pause || vote.pause;
        decision.stop = decision.stop || vote.stop;
        held_by_all = std::min(held_by_all, vote.pending_epoch);
    }
    if (!votes.empty() && held_by_all > epoch) decision.switch_to = held_by_all;
    return decision;
}

}  // namespace eb
