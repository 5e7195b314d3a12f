#pragma once

#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "base/rank.hpp"
#include "schedule/table_switch.hpp"

namespace eb {

// Who builds a cycle, decided so that every unit of the set takes the same
// decision, also when losses are asymmetric (docs/control-api.md, "One
// set"). Each cycle header carries the ranks its sender has lost. From those
// lists and its own, every unit proposes who is out of the cycle, and tells
// the others; each unit then follows the proposal of the lowest rank it
// heard that keeps its proposer in. So a unit follows another's view, never
// a view of its own that the others do not share.

// Links reported broken (one side lost the other), as (lower, higher) rank,
// sorted and unique.
using Broken_links = std::vector<std::pair<Rank, Rank>>;

struct Membership_proposal {
    std::vector<bool> out;  // by rank
    Broken_links reported;  // every link reported broken this cycle: `before` for the next
};

// `lost_lists` by rank: the list in each header heard this cycle (1: a rank
// its sender lost), this unit's own as it stands now at `self`, nullopt for
// the others. A link is broken where a list names a live rank. The proposer
// acts at once on its own broken links (it cannot build with those ranks);
// another unit's report only once it was also reported the cycle `before`,
// which gives the other side a cycle to tell its own loss, so that a unit
// cut off, which sees its losses first, is not believed over the set. Of
// the broken links, it puts out the rank with the most, then the next,
// until none is left among those in; ties go against the higher rank, and
// against the others before the proposer (so of two units that lost each
// other, each keeps itself: a lost peer and a cut are the same to it). A
// proposer that hears a quorum (hears_a_quorum) puts out every other rank
// before itself: having lost several peers at once (a server of two units,
// half a set hung) it is not the one on most broken links but the one left.
Membership_proposal propose_membership(Rank self, std::span<const Rank> live,
                                       std::span<const std::optional<Membership>> lost_lists,
                                       const Broken_links& before);

// Whether the live ranks `self` has not lost (`own_lost`, by rank: 1 for a
// rank lost), itself included, could be the set that goes on: more than
// half of `live` (sorted), or exactly half with its lowest rank among them.
// Of two sides that cannot hear each other, at most one does.
bool hears_a_quorum(Rank self, std::span<const Rank> live, const Membership& own_lost);

// Whose proposal the cycle follows: the lowest rank whose proposal was heard
// (`outs`, by rank: its out list; this unit's own included; nullopt where
// none came) and keeps that rank in; nullopt when none does: this unit is
// alone. `cut_from_leader`: that proposal keeps in a lower rank this unit
// did not hear, so the others may follow a rank (that one, or one below)
// whose decision this unit cannot know: it must sit the cycle out.
struct Leader {
    std::optional<Rank> proposer;
    bool cut_from_leader = false;

    friend bool operator==(const Leader&, const Leader&) = default;
};
Leader leading_proposer(std::span<const Rank> live, std::span<const std::optional<Membership>> outs);

// What unit `self` does in a cycle, from the proposals it heard (`outs`, as
// above; its own always there).
struct Following {
    Rank followed = 0;  // whose proposal it takes: its out list and decision
    // That proposal puts it out (alone, its own does): out until a new table.
    bool put_out = false;
    // Unsure of what the set decides: cut from the leader, or it lost, only
    // since it made its own proposal, a rank the proposal it follows keeps
    // in (that rank may have lost `self` first and lead a part of the set
    // that counts `self`'s chunk dropped). It sits this cycle out, its chunk
    // in doubt, and stays in the set.
    bool sits_out = false;
    // Its own proposal is the one followed (by whoever heard it).
    bool own_followed = false;
    // ... and it counts the chunks of the BUs that proposal puts out: not
    // while it sits out, as its proposal may then have reached nobody.
    bool leads = false;

    friend bool operator==(const Following&, const Following&) = default;
};
Following follow_proposals(Rank self, std::span<const Rank> live, std::span<const std::optional<Membership>> outs);

}  // namespace eb
