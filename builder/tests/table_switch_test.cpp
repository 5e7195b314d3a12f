#include "table_switch.hpp"

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

}  // namespace
}  // namespace eb
