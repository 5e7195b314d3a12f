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

// Messages on a barrier's critical path among `participants` processes: the
// steps from the first arrival to the last release when every process
// handles one message per step (its children's tokens as they come, in
// the order they can come; then, released, its children's releases in the
// order of barrier_role), and messages between processes travel in
// parallel. It is what decides between the barriers on a farm, where every
// process has its own cores: centralized 2(P-1), tournament about
// log2(P)(log2(P)+3)/2. None: 0.
std::size_t barrier_critical_path(Barrier_kind kind, std::size_t participants);

}  // namespace eb
