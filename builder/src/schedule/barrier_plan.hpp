#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace eb {

// Synchronisation barriers of the reference design (section III-D).
enum class Barrier_kind { none, centralized, tournament };

std::string_view barrier_name(Barrier_kind kind);

// One participant's part in a barrier, as positions 0..P-1 among the
// participants. Arrival: wait for every child, then tell the parent. Release:
// wait for the parent, then release every child. The root (no parent) is the
// master of a centralized barrier or the champion of a tournament.
struct Barrier_role {
    std::optional<std::size_t> parent;
    std::vector<std::size_t> children;  // in the order they are met

    friend bool operator==(const Barrier_role&, const Barrier_role&) = default;
};

// Centralized: position 0 is the master, everyone else its child.
// Tournament (Fig. 7): in round r = 0, 1, ... position p with p mod 2^(r+1)
// == 2^r loses to (reports to) p - 2^r, the winner; winners go on to the next
// round. Depth ceil(log2 P), so arrival and release take O(log P) steps.
// None: no parent, no children.
Barrier_role barrier_role(Barrier_kind kind, std::size_t position, std::size_t participants);

}  // namespace eb
