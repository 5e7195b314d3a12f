#include "schedule/table_switch.hpp"

namespace eb {
namespace {

// Whether every membership lists `rank`.
bool all_list(std::span<const Membership> memberships, Rank rank) {
    for (const Membership& membership : memberships)
        if (rank >= membership.size() || membership[rank] == 0) return false;
    return true;
}

}  // namespace

Peer_change peer_change(bool live_before, bool lost, bool live_after) {
    if (!live_after) return live_before ? Peer_change::leave : Peer_change::keep;
    return !live_before || lost ? Peer_change::join : Peer_change::keep;
}

std::vector<bool> kept_joiners(const std::vector<bool>& joined, std::span<const Membership> reports) {
    std::vector<bool> kept(joined.size());
    for (Rank rank = 0; rank < joined.size(); ++rank) kept[rank] = joined[rank] && all_list(reports, rank);
    return kept;
}

Join_outcome judge_join(Rank self, const std::vector<bool>& connected, std::span<const Membership> verdicts) {
    if (verdicts.empty() || !all_list(verdicts, self)) return {};
    Join_outcome outcome{true, std::vector<bool>(connected.size())};
    for (Rank rank = 0; rank < connected.size(); ++rank) {
        if (rank == self || !all_list(verdicts, rank)) continue;
        if (!connected[rank]) return {};
        outcome.keep[rank] = true;
    }
    outcome.keep[self] = true;
    return outcome;
}

}  // namespace eb
