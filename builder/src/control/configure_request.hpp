#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "schedule/peer_address.hpp"
#include "base/rank.hpp"
#include "schedule/rank_table.hpp"

namespace eb {

// The one version of the rank table document this builder reads.
inline constexpr std::string_view rank_table_version = "eventbuilder.daq.io/ranktable/v1";
// A rank table holds at most this many ranks (the schedule's N).
inline constexpr std::size_t max_table_ranks = 65536;

// The body of POST /control/configure, checked: {"rank": R, "table": {...}}
// with the table as in operator/docs/rank-table.md. Only what the builder
// uses is kept; other fields of the document are ignored.
struct Configure_request {
    Rank rank = 0;                   // this unit's rank in the table
    std::uint64_t epoch = 0;         // >= 1
    std::vector<Peer_address> peers; // every rank's data address, by rank, dummies included
    // By rank: ranks[].function of live ranks (checked against table.layout),
    // dummy where the state is not "live".
    std::vector<Rank_function> functions;
    std::string run;                 // table.run, empty when absent
    // table.resumeEvent (0 when absent): a unit that never built (a spare)
    // starting a set under this table with no unit already building (every
    // unit it had was lost or moved) starts at this event at least, past
    // what its lost units may have built; units joining a building set take
    // its place instead, and a unit that built keeps its own.
    std::uint64_t resume_event = 0;
    // Ascending: the live ranks with ranks[].sourceUnread true (each runs BU alone).
    std::vector<Rank> unread_sources{};
    // ranks[].sources (one list per rank, empty where absent) and
    // table.unreadStreams: the readout streams every MEP names.
    Readout_streams streams{};

    friend bool operator==(const Configure_request&, const Configure_request&) = default;
};

// Whether a table must have a live rank running an RU and one running a
// BU. A unit's configure must (a set without either builds nothing). A
// readout driver reading its pod's table need not: every unit failed with
// no spare left, and the table is a spare's, which a unit is restored onto.
enum class Live_ranks { required, optional };

// Parses and checks a configure body. `required_rank` is the process's
// --rank, when it was started with one: the body's rank must be that one.
// Errors name the JSON path and the fix, e.g. "table.ranks[2].address 'x':
// expected host:port, e.g. run-eb-2.run-eb:7000". Never throws for bad input.
std::variant<Configure_request, std::string> parse_configure_request(std::string_view body,
                                                                     std::optional<Rank> required_rank,
                                                                     Live_ranks live = Live_ranks::required);

}  // namespace eb
