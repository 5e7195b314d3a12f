#pragma once

namespace eb {

// What a switch to a new rank table does to this unit's connections with
// one peer.
enum class Peer_change {
    keep,   // live in both tables and not lost, or a dummy in both
    leave,  // a dummy in the new table: its connections close
    join,   // live in the new table and dummy before, or lost: new connections
            // are made (a lost peer's rank may run a restarted process now)
};

Peer_change peer_change(bool live_before, bool lost, bool live_after);

}  // namespace eb
