#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/rank.hpp"

namespace eb {

// What a switch to a new rank table does to this unit's connections with
// one peer.
enum class Peer_change {
    keep,   // live in both tables and not lost, or a dummy in both
    leave,  // a dummy in the new table: its connections close
    join,   // live in the new table and dummy before, or lost: new connections
            // are made (a lost peer's rank may run a restarted process now)
};

Peer_change peer_change(bool live_before, bool lost, bool live_after);

// Whom a unit builds with under a new table, one byte per rank (1: yes), as
// units tell each other at a switch (docs/formats.md): a running unit's
// report (the ranks it is connected to) and its verdict to a process joining
// the set (the ranks it keeps).
using Membership = std::vector<std::uint8_t>;

// A running unit at a switch keeps a joiner it connected (`joined`, by rank)
// only if every running unit that goes on with it reports that joiner
// connected too: a joiner that reached some units and not others is lost
// for all of them, never for some.
std::vector<bool> kept_joiners(const std::vector<bool>& joined, std::span<const Membership> reports);

// A process joining a running set, from the verdicts of the running units
// it connected to: it joins only if every verdict keeps it and it is
// connected (`connected`, by rank) to every rank all of them keep (else a
// unit would wait on it, or it on one). `keep`: the ranks it builds with.
struct Join_outcome {
    bool joined = false;
    std::vector<bool> keep;  // by rank; only meaningful when joined

    friend bool operator==(const Join_outcome&, const Join_outcome&) = default;
};
Join_outcome judge_join(Rank self, const std::vector<bool>& connected, std::span<const Membership> verdicts);

}  // namespace eb
