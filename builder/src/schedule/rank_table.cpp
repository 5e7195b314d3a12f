#include "schedule/rank_table.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
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

Rank_table::Rank_table(std::vector<Rank_function> functions, std::vector<Rank> unread_sources, Readout_streams readout)
    : functions_(std::move(functions)), unread_(std::move(unread_sources)), streams_(std::move(readout)) {
    if (!streams_.by_rank.empty() && streams_.by_rank.size() != functions_.size())
        throw std::invalid_argument("Rank_table: streams for " + std::to_string(streams_.by_rank.size()) + " ranks of " +
                                    std::to_string(functions_.size()));
    std::sort(unread_.begin(), unread_.end());
    unread_.erase(std::unique(unread_.begin(), unread_.end()), unread_.end());
    for (const Rank rank : unread_)
        if (rank >= units() || !live(rank) || runs_ru(rank))
            throw std::invalid_argument("Rank_table: an unread source must be a live rank that runs no RU");
    for (Rank rank = 0; rank < units(); ++rank) {
        if (!runs_ru(rank) && !streams(rank).empty())
            throw std::invalid_argument("Rank_table: only a rank that runs an RU reads streams");
        if (live(rank)) live_ranks_.push_back(rank);
        if (runs_ru(rank)) rus_.push_back(rank);
        if (runs_bu(rank)) bus_.push_back(rank);
        if (runs_ru(rank) || source_unread(rank)) sources_.push_back(rank);
    }
}

bool Rank_table::source_unread(Rank rank) const { return std::binary_search(unread_.begin(), unread_.end(), rank); }

std::size_t Rank_table::source_slot(Rank source) const {
    return static_cast<std::size_t>(std::lower_bound(sources_.begin(), sources_.end(), source) - sources_.begin());
}

const std::vector<std::string>& Rank_table::streams(Rank rank) const {
    static const std::vector<std::string> none;
    return streams_.by_rank.empty() ? none : streams_.by_rank[rank];
}

std::size_t Rank_table::bu_index(Rank rank) const {
    return static_cast<std::size_t>(std::lower_bound(bus_.begin(), bus_.end(), rank) - bus_.begin());
}

}  // namespace eb
