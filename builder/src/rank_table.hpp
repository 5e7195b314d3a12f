#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "rank.hpp"

namespace eb {

// Folded: every live rank runs an RU and a BU in one process (the LHCb
// choice). Unfolded: even ranks run only an RU, odd ranks only a BU.
enum class Layout { folded, unfolded };

std::string_view layout_name(Layout layout);

// Who does what at each rank of the linear-shifting schedule. A dummy rank
// keeps the schedule in step and moves no data (no process runs there).
class Rank_table {
public:
    // `dummies` must be distinct ranks below `units`.
    Rank_table(Rank units, Layout layout, const std::vector<Rank>& dummies);

    Rank units() const { return static_cast<Rank>(live_.size()); }
    bool live(Rank rank) const { return live_[rank]; }
    bool runs_ru(Rank rank) const { return live_[rank] && (layout_ == Layout::folded || rank % 2 == 0); }
    bool runs_bu(Rank rank) const { return live_[rank] && (layout_ == Layout::folded || rank % 2 == 1); }

    // Ascending. The RU of rank r reads source r, so rus() are also the
    // sources every MEP holds, in slot order.
    const std::vector<Rank>& live_ranks() const { return live_ranks_; }
    const std::vector<Rank>& rus() const { return rus_; }
    const std::vector<Rank>& bus() const { return bus_; }
    // Position of a live BU in bus(): which chunk of a cycle it builds.
    std::size_t bu_index(Rank rank) const;

private:
    Layout layout_;
    std::vector<bool> live_;
    std::vector<Rank> live_ranks_, rus_, bus_;
};

}  // namespace eb
