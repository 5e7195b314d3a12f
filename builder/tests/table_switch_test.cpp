#include "schedule/table_switch.hpp"

#include <gtest/gtest.h>

namespace eb {
namespace {

TEST(TableSwitch, PeerChanges) {
    struct Row {
        bool live_before, lost, live_after;
        Peer_change expected;
    };
    const Row rows[] = {
        {true, false, true, Peer_change::keep},     // stays in the set
        {true, false, false, Peer_change::leave},   // moved to standby
        {true, true, false, Peer_change::leave},    // lost, and the new table makes it a dummy (failover)
        {true, true, true, Peer_change::join},      // lost, and live again: its restarted process rejoins
        {false, false, true, Peer_change::join},    // a spare made live
        {false, false, false, Peer_change::keep},   // a dummy stays one
    };
    for (const Row& row : rows)
        EXPECT_EQ(peer_change(row.live_before, row.lost, row.live_after), row.expected)
            << row.live_before << row.lost << row.live_after;
}

// Four ranks; this unit is rank 0, ranks 1 and 2 go on with it, rank 3 joins
// (and, in some rows, rank 2 joins too).
TEST(TableSwitch, ARunningUnitKeepsAJoinerOnlyIfEveryRunningUnitConnectedIt) {
    struct Row {
        const char* name;
        std::vector<bool> joined;
        std::vector<Membership> reports;
        std::vector<bool> expected;
    };
    const Row rows[] = {
        {"everyone connected it", {false, false, false, true}, {{1, 1, 1, 1}, {1, 1, 1, 1}}, {false, false, false, true}},
        {"one running unit did not", {false, false, false, true}, {{1, 1, 1, 1}, {1, 1, 1, 0}}, {false, false, false, false}},
        {"this unit did not", {false, false, false, false}, {{1, 1, 1, 1}, {1, 1, 1, 1}}, {false, false, false, false}},
        {"no running unit left to ask", {false, false, false, true}, {}, {false, false, false, true}},
        {"two joiners, one reached by all", {false, false, true, true}, {{1, 1, 1, 0}}, {false, false, true, false}},
        {"a short report lists nobody beyond it", {false, false, false, true}, {{1, 1, 1}}, {false, false, false, false}},
    };
    for (const Row& row : rows) EXPECT_EQ(kept_joiners(row.joined, row.reports), row.expected) << row.name;
}

// The joiner is rank 3 of four; ranks 0 and 1 run, rank 2 runs or joins too.
TEST(TableSwitch, AJoinerJoinsOnlyIfEveryVerdictKeepsItAndItReachedAllTheyKeep) {
    struct Row {
        const char* name;
        std::vector<bool> connected;
        std::vector<Membership> verdicts;
        Join_outcome expected;
    };
    const Row rows[] = {
        {"kept by all, connected to all", {true, true, true, false}, {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}},
         {true, {true, true, true, true}}},
        {"one unit dropped it", {true, true, true, false}, {{1, 1, 1, 1}, {1, 1, 1, 0}, {1, 1, 1, 1}}, {}},
        {"no verdict at all", {true, true, true, false}, {}, {}},
        {"kept, but not connected to a rank all keep", {true, false, true, false}, {{1, 1, 1, 1}, {1, 1, 1, 1}}, {}},
        {"another joiner dropped by all: built without", {true, true, true, false}, {{1, 1, 0, 1}, {1, 1, 0, 1}},
         {true, {true, true, false, true}}},
        {"another joiner it never reached, dropped by all", {true, true, false, false}, {{1, 1, 0, 1}, {1, 1, 0, 1}},
         {true, {true, true, false, true}}},
        {"a rank only some keep is not built with", {true, true, true, false}, {{1, 1, 1, 1}, {1, 1, 0, 1}},
         {true, {true, true, false, true}}},
    };
    for (const Row& row : rows) EXPECT_EQ(judge_join(3, row.connected, row.verdicts), row.expected) << row.name;
}

}  // namespace
}  // namespace eb
