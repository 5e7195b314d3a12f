#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fd.hpp"
#include "peer_address.hpp"
#include "rank.hpp"
#include "stop_flag.hpp"

namespace eb {

// The data connections of one unit, indexed by rank: to[r] carries what this
// unit's RU sends to BU r, from[r] what RU r sends to this unit's BU. One
// direction per connection keeps the flows independent. The entries for the
// unit's own rank stay empty. All sockets are non-blocking.
struct Tcp_mesh {
    std::vector<Fd> to;
    std::vector<Fd> from;
};

// Opens the data-plane listener on 0.0.0.0:port now, so a clash fails at startup.
Fd listen_for_peers(std::uint16_t port);

// Dials every other live unit (live[r]; empty: all are) and accepts a dial from each, retrying resolution and
// connection with backoff forever (in Kubernetes, peers' names resolve and
// their ports open at different times) and logging progress every few
// seconds. Returns nullopt if stop comes first; throws Transport_error if a
// peer disagrees about the mesh (e.g. a different --peers list).
std::optional<Tcp_mesh> connect_mesh(Fd listener, Rank rank, std::span<const Peer_address> peers,
                                     std::vector<bool> live, const Stop_flag& stop);

}  // namespace eb
