#include "schedule/barrier_plan.hpp"

#include <algorithm>

namespace eb {

std::string_view barrier_name(Barrier_kind kind) {
    switch (kind) {
        case Barrier_kind::none: return "none";
        case Barrier_kind::centralized: return "centralized";
        case Barrier_kind::tournament: return "tournament";
    }
    return "unknown";
}

Barrier_role barrier_role(Barrier_kind kind, std::size_t position, std::size_t participants) {
    Barrier_role role;
    switch (kind) {
        case Barrier_kind::none: break;
        case Barrier_kind::centralized:
            if (position != 0) role.parent = 0;
            else
                for (std::size_t p = 1; p < participants; ++p) role.children.push_back(p);
            break;
        case Barrier_kind::tournament:
            for (std::size_t half = 1; half < participants; half *= 2) {
                if (position % (2 * half) == half) {
                    role.parent = position - half;  // lost this round: out of the tournament
                    break;
                }
                if (position + half < participants) role.children.push_back(position + half);
            }
            break;
    }
    return role;
}

namespace {

// The step at which `position` holds all its children's tokens.
std::size_t arrived(Barrier_kind kind, std::size_t position, std::size_t participants) {
    std::vector<std::size_t> landing;  // when each child's token lands: one step after it arrived
    for (const std::size_t child : barrier_role(kind, position, participants).children)
        landing.push_back(arrived(kind, child, participants) + 1);
    std::sort(landing.begin(), landing.end());
    std::size_t step = 0;
    for (const std::size_t lands : landing) step = std::max(step + 1, lands);
    return step;
}

// The last step at which a process under `position`, released at `step`, is released.
std::size_t last_release(Barrier_kind kind, std::size_t position, std::size_t participants, std::size_t step) {
    std::size_t last = step;
    std::size_t sent = 0;
    for (const std::size_t child : barrier_role(kind, position, participants).children)
        last = std::max(last, last_release(kind, child, participants, step + ++sent));
    return last;
}

}  // namespace

std::size_t barrier_critical_path(Barrier_kind kind, std::size_t participants) {
    if (kind == Barrier_kind::none || participants < 2) return 0;
    return last_release(kind, 0, participants, arrived(kind, 0, participants));
}

}  // namespace eb
