#pragma once

#include <cstdint>

namespace eb {

// Where a unit stands when it connects: sent in the hello on every
// connection it dials, so a unit joining a running set learns the set's
// place in the event stream from the hellos of the units already running.
struct Mesh_position {
    std::uint32_t epoch = 1;
    bool in_session = false;  // already building with the others (a mesh that grows)
    std::uint64_t next_chunk = 0;
    std::uint64_t cycles_done = 0;
    // Moves data over verbs queue pairs set up on this mesh (else over it):
    // in the hello too, so units of one set that disagree are told at once.
    bool verbs = false;
    // Connections per peer and direction (Tcp_mesh::streams), likewise.
    unsigned streams = 1;
};

}  // namespace eb
