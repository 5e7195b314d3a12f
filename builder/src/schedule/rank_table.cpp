#include "rank_table.hpp"

#include <algorithm>
#include <utility>

namespace eb {

std::string_view layout_name(Layout layout) { return layout == Layout::folded ? "folded" : "unfolded"; }

std::vector<Rank_function> flag_functions(Rank units, Layout layout, const std::vector<Rank>& dummies) {
    std::vector<Rank_function> functions(units, Rank_function::ru_bu);
    if (layout == Layout::unfolded)
        for (Rank rank = 0; rank < units; ++rank) functions[rank] = rank % 2 == 0 ? Rank_function::ru : Rank_function::bu;
    for (const Rank dummy : dummies) functions.at(dummy) = Rank_function::dummy;
    return functions;
}

Rank_table::Rank_table(std::vector<Rank_function> functions) : functions_(std::move(functions)) {
    for (Rank rank = 0; rank < units(); ++rank) {
        if (live(rank)) live_ranks_.push_back(rank);
        if (runs_ru(rank)) rus_.push_back(rank);
        if (runs_bu(rank)) bus_.push_back(rank);
    }
}

std::size_t Rank_table::bu_index(Rank rank) const {
    return static_cast<std::size_t>(std::lower_bound(bus_.begin(), bus_.end(), rank) - bus_.begin());
}

}  // namespace eb
