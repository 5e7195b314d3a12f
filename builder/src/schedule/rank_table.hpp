#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/rank.hpp"

namespace eb {

// Folded: every live rank runs an RU and a BU in one process (the LHCb
// choice). Unfolded: a unit's RU and BU run on two ranks.
enum class Layout { folded, unfolded };

std::string_view layout_name(Layout layout);

// What a rank runs: nothing (a dummy keeps the schedule in step and moves no
// data), an RU, a BU, or both (folded).
enum class Rank_function { dummy, ru, bu, ru_bu };

// The functions of a self-configured set (--layout, --dummies), which has no
// rank table to read them from: folded, every live rank runs RU+BU;
// unfolded, even ranks run an RU and odd ranks a BU. `dummies` must be
// distinct ranks below `units`.
std::vector<Rank_function> flag_functions(Rank units, Layout layout, const std::vector<Rank>& dummies);

// Who does what at each rank of the linear-shifting schedule; RUs and BUs
// may sit on any ranks (a table's ranks[].function). A rank whose source is
// unread (ranks[].sourceUnread: its unit's readout fibres went with a failed
// server) runs no RU, yet every MEP keeps its slot, as missing.
// The readout streams of a table: those each rank's RU reads
// (ranks[].sources: empty, or one list per rank) and those of the run no
// RU reads since a failure (unreadStreams). Every MEP names both.
struct Readout_streams {
    std::vector<std::vector<std::string>> by_rank;
    std::vector<std::string> unread;

    friend bool operator==(const Readout_streams&, const Readout_streams&) = default;
};

class Rank_table {
public:
    // Each of `unread_sources` must be a live rank that runs no RU; only
    // ranks that run an RU read streams.
    explicit Rank_table(std::vector<Rank_function> functions, std::vector<Rank> unread_sources = {},
                        Readout_streams readout = {});

    Rank units() const { return static_cast<Rank>(functions_.size()); }
    Rank_function function(Rank rank) const { return functions_[rank]; }
    bool live(Rank rank) const { return functions_[rank] != Rank_function::dummy; }
    bool runs_ru(Rank rank) const { return functions_[rank] == Rank_function::ru || functions_[rank] == Rank_function::ru_bu; }
    bool runs_bu(Rank rank) const { return functions_[rank] == Rank_function::bu || functions_[rank] == Rank_function::ru_bu; }

    // Ascending. The RU of rank r reads source r.
    const std::vector<Rank>& live_ranks() const { return live_ranks_; }
    const std::vector<Rank>& rus() const { return rus_; }
    const std::vector<Rank>& bus() const { return bus_; }
    // The sources every MEP holds a slot for, ascending: the RUs' and the
    // unread ones. Slot i of a MEP is source sources()[i].
    const std::vector<Rank>& sources() const { return sources_; }
    bool source_unread(Rank rank) const;
    std::size_t source_slot(Rank source) const;
    // Position of a live BU in bus(): which chunk of a cycle it builds.
    std::size_t bu_index(Rank rank) const;

    // The streams the RU of `rank` reads (none for a rank without an RU).
    const std::vector<std::string>& streams(Rank rank) const;
    // The run's streams no RU reads since a failure: every MEP lacks them.
    const std::vector<std::string>& unread_streams() const { return streams_.unread; }

private:
    std::vector<Rank_function> functions_;
    std::vector<Rank> live_ranks_, rus_, bus_, sources_, unread_;
    Readout_streams streams_;
};

}  // namespace eb
