#include "barrier_plan.hpp"

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

}  // namespace eb
