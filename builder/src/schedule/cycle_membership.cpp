#include "schedule/cycle_membership.hpp"

#include <algorithm>

namespace eb {

Membership_proposal propose_membership(Rank self, std::span<const Rank> live,
                                       std::span<const std::optional<Membership>> lost_lists,
                                       const Broken_links& before) {
    const Rank units = static_cast<Rank>(lost_lists.size());
    std::vector<bool> is_live(units);
    for (const Rank rank : live) is_live[rank] = true;
    Membership_proposal proposal{std::vector<bool>(units), {}};
    for (const Rank reporter : live) {
        if (!lost_lists[reporter]) continue;
        const Membership& lost = *lost_lists[reporter];
        for (Rank peer = 0; peer < std::min<std::size_t>(units, lost.size()); ++peer)
            if (lost[peer] != 0 && peer != reporter && is_live[peer])
                proposal.reported.emplace_back(std::min(reporter, peer), std::max(reporter, peer));
    }
    std::sort(proposal.reported.begin(), proposal.reported.end());
    proposal.reported.erase(std::unique(proposal.reported.begin(), proposal.reported.end()), proposal.reported.end());

    // A proposer that still hears a quorum is never the one put out for its
    // own losses: the peers it lost went, not it (a server of two units).
    const bool quorum = hears_a_quorum(self, live, lost_lists[self].value_or(Membership(units, 0)));
    Broken_links acted_on;
    for (const auto& link : proposal.reported)
        if (link.first == self || link.second == self || std::binary_search(before.begin(), before.end(), link))
            acted_on.push_back(link);
    // Put out the rank on most broken links among those still in, until none is left.
    std::vector<std::size_t> degree(units);
    while (true) {
        std::fill(degree.begin(), degree.end(), 0);
        for (const auto& [low, high] : acted_on)
            if (!proposal.out[low] && !proposal.out[high]) {
                ++degree[low];
                ++degree[high];
            }
        Rank worst = units;
        for (const Rank rank : live) {
            if (degree[rank] == 0) continue;
            const auto worse = [&](Rank a, Rank b) {  // a is put out before b
                if (quorum && (a == self) != (b == self)) return b == self;
                if (degree[a] != degree[b]) return degree[a] > degree[b];
                if ((a == self) != (b == self)) return b == self;
                return a > b;
            };
            if (worst == units || worse(rank, worst)) worst = rank;
        }
        if (worst == units) return proposal;
        proposal.out[worst] = true;
    }
}

bool hears_a_quorum(Rank self, std::span<const Rank> live, const Membership& own_lost) {
    std::size_t heard = 0;
    for (const Rank rank : live)
        if (rank == self || rank >= own_lost.size() || own_lost[rank] == 0) ++heard;
    const bool lowest_heard = !live.empty() && (live.front() == self || live.front() >= own_lost.size() ||
                                                own_lost[live.front()] == 0);
    return 2 * heard > live.size() || (2 * heard == live.size() && lowest_heard);
}

Leader leading_proposer(std::span<const Rank> live, std::span<const std::optional<Membership>> outs) {
    const auto keeps = [&](Rank proposer, Rank rank) {
        return rank < outs[proposer]->size() && (*outs[proposer])[rank] == 0;
    };
    for (const Rank rank : live) {
        if (!outs[rank] || !keeps(rank, rank)) continue;
        Leader leader{rank, false};
        for (const Rank lower : live)
            if (lower < rank && !outs[lower] && keeps(rank, lower)) leader.cut_from_leader = true;
        return leader;
    }
    return {};
}

Following follow_proposals(Rank self, std::span<const Rank> live, std::span<const std::optional<Membership>> outs) {
    const Leader leader = leading_proposer(live, outs);
    // No leader: alone, and out by its own count.
    Following following{leader.proposer.value_or(self)};
    const Membership& out = *outs[following.followed];
    const Membership& own = *outs[self];
    following.put_out = out[self] != 0;
    bool lost_since_proposing = false;
    for (const Rank peer : live)
        if (peer != self && !outs[peer] && out[peer] == 0 && own[peer] == 0) lost_since_proposing = true;
    following.sits_out = !following.put_out && (leader.cut_from_leader || lost_since_proposing);
    following.own_followed = leader.proposer == self && !leader.cut_from_leader;
    following.leads = following.own_followed && !following.sits_out;
    return following;
}

}  // namespace eb
