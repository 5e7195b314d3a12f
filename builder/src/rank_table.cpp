#include "rank_table.hpp"

#include <algorithm>

namespace eb {

std::string_view layout_name(Layout layout) { return layout == Layout::folded ? "folded" : "unfolded"; }

Rank_table::Rank_table(Rank units, Layout layout, const std::vector<Rank>& dummies)
    : layout_(layout), live_(units, true) {
    for (const Rank dummy : dummies) live_.at(dummy) = false;
    for (Rank rank = 0; rank < units; ++rank) {
        if (live_[rank]) live_ranks_.push_back(rank);
        if (runs_ru(rank)) rus_.push_back(rank);
        if (runs_bu(rank)) bus_.push_back(rank);
    }
}

std::size_t Rank_table::bu_index(Rank rank) const {
    return static_cast<std::size_t>(std::lower_bound(bus_.begin(), bus_.end(), rank) - bus_.begin());
}

}  // namespace eb
