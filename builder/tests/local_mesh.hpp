#pragma once

#include <vector>

#include "base/stop_flag.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace eb::test {

// Connects `units` units on 127.0.0.1 with free ports, each dialling and
// accepting in its own thread as separate processes would, and returns each
// unit's mesh, indexed by rank. Ranks with live[r] false are dummies and get
// an empty mesh; an empty `live` means all are live. `streams` connections
// per peer and direction (--tcp-streams).
std::vector<Tcp_mesh> connect_local_mesh(Rank units, const Stop_flag& stop, const std::vector<bool>& live = {},
                                         unsigned streams = 1);

}  // namespace eb::test
