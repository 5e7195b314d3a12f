#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "transport/data_key.hpp"
#include "transport/mesh_position.hpp"
#include "base/fd.hpp"
#include "schedule/peer_address.hpp"
#include "base/rank.hpp"
#include "transport/refusal.hpp"
#include "base/stop_flag.hpp"

namespace eb {

// The data connections of one unit, indexed by rank: to[r] carries what this
// unit's RU sends to BU r, from[r] what RU r sends to this unit's BU. One
// direction per connection keeps the flows independent. The entries for the
// unit's own rank stay empty. All sockets are non-blocking.
// With `streams` S > 1 (--tcp-streams), each peer and direction has S - 1
// more connections that carry slices of the data alone (one TCP stream is
// copied by one core on each side, about 30 Gb/s; a 100-200 Gb/s NIC needs
// several): rank r's are more_to/more_from[r * (S - 1) + i] for i < S - 1.
struct Tcp_mesh {
    std::vector<Fd> to;
    std::vector<Fd> from;
    std::vector<Fd> more_to = {};
    std::vector<Fd> more_from = {};
    unsigned streams = 1;

    // A mesh of `units` ranks, none connected.
    static Tcp_mesh empty(std::size_t units, unsigned streams = 1) {
        const std::size_t more = units * (streams - 1);
        return {std::vector<Fd>(units), std::vector<Fd>(units), std::vector<Fd>(more), std::vector<Fd>(more), streams};
    }

    // Stream `stream` (0..streams-1) to and from rank `peer`: stream 0 is to/from.
    Fd& to_stream(Rank peer, unsigned stream) { return stream == 0 ? to[peer] : more_to[more(peer, stream)]; }
    Fd& from_stream(Rank peer, unsigned stream) { return stream == 0 ? from[peer] : more_from[more(peer, stream)]; }
    const Fd& to_stream(Rank peer, unsigned stream) const { return stream == 0 ? to[peer] : more_to[more(peer, stream)]; }
    const Fd& from_stream(Rank peer, unsigned stream) const {
        return stream == 0 ? from[peer] : more_from[more(peer, stream)];
    }

private:
    std::size_t more(Rank peer, unsigned stream) const { return std::size_t{peer} * (streams - 1) + stream - 1; }
};

// --tcp-streams's bounds: data connections per peer and direction.
inline constexpr unsigned max_tcp_streams = 16;

// Opens the data-plane listener on 0.0.0.0:port now, so a clash fails at startup.
Fd listen_for_peers(std::uint16_t port);

struct Mesh_connections {
    Tcp_mesh mesh;  // both entries of each peer connected both ways, none of the others
    std::vector<std::optional<Mesh_position>> hellos;  // by rank, of the wanted peers that dialled in
    // By rank: the later epoch of a joiner that refused this unit's switch
    // (it can never join under it; not waited for), else 0.
    std::vector<std::uint32_t> later_epochs;

    bool connected(Rank peer) const { return bool(mesh.to[peer]) && bool(mesh.from[peer]); }  // all its streams
};

// A host name's IPv4 address, or why there is none. resolve_host asks the
// system (getaddrinfo: DNS, /etc/hosts), which may block for seconds when DNS
// is unreachable; the mesh calls it on a thread of its own, so neither a
// stop nor the other peers' dials wait for it. Tests put in a slow one.
using Resolved = std::variant<in_addr, std::string>;
using Resolver = std::function<Resolved(const std::string& host)>;
Resolved resolve_host(const std::string& host);

// Dials every wanted peer (wanted[r]) and accepts a dial from each, retrying
// resolution and connection with backoff (in Kubernetes, peers' names
// resolve and their ports open at different times) and logging progress
// every few seconds. Dials from peers of another epoch are dropped (they
// dial again); a joiner that refuses a running set's switch from a later
// epoch is not dialled again (later_epochs). A set that starts waits for all its peers however long they
// take; a join does not wedge a running set: connecting to a running set
// (position.in_session, or a hello that says so) ends `join_timeout` after
// it began (after that hello), with the peers connected by then. Returns
// nullopt if stop comes first; throws Transport_error if a peer disagrees
// about the mesh (e.g. a different --peers list). Dials it refuses are
// counted in `refused` if given.
std::optional<Mesh_connections> connect_peers(const Fd& listener, Rank rank, std::span<const Peer_address> peers,
                                              std::vector<bool> wanted, const Mesh_position& position,
                                              int peer_timeout_ms, std::chrono::milliseconds join_timeout,
                                              const Stop_flag& stop, const Data_key& key = Data_key(),
                                              Resolver resolve = resolve_host, Refusal_counts* refused = nullptr);

// --join-timeout-ms's default.
inline constexpr std::chrono::milliseconds default_join_timeout{5000};

// The full mesh of every other live unit (live[r]; empty: all are), at epoch 1,
// with `streams` connections per peer and direction.
std::optional<Tcp_mesh> connect_mesh(Fd listener, Rank rank, std::span<const Peer_address> peers,
                                     std::vector<bool> live, const Stop_flag& stop, unsigned streams = 1);

}  // namespace eb
