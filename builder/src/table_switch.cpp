#include "table_switch.hpp"

namespace eb {

Peer_change peer_change(bool live_before, bool lost, bool live_after) {
    if (!live_after) return live_before ? Peer_change::leave : Peer_change::keep;
    return !live_before || lost ? Peer_change::join : Peer_change::keep;
}

}  // namespace eb
