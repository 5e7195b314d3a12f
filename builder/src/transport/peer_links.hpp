#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/data_threads.hpp"
#include "base/fd.hpp"
#include "base/rank.hpp"
#include "base/stop_flag.hpp"
#include "schedule/peer_address.hpp"
#include "transport/data_key.hpp"
#include "transport/mesh_position.hpp"
#include "transport/mesh_transport.hpp"
#include "transport/refusal.hpp"
#include "transport/transport_settings.hpp"

namespace eb {

// A unit's links to its peers for one session, and the only way a unit
// reaches them: each connect dials and accepts the connections of the peers
// it wants over the data port (each side's hello saying where it stands in
// the event stream); the first makes the transport over them (TCP, or verbs
// queue pairs set up over them: make_transport), each later one (joiners at
// a switch) adds to it. The unit builds over the Mesh_transport it is given
// and never sees a socket.
class Peer_links {
public:
    // Opens the data-plane listener on 0.0.0.0:port now, so a clash fails
    // the configure that asks for it.
    static Fd listen(std::uint16_t port);

    struct Policy {
        Transport_settings transport;
        std::chrono::milliseconds join_timeout;
        const Data_key& key;             // outlives the links
        Refusal_counts* refused = nullptr;  // dials refused, counted here if given
    };

    // What a connect found, by rank.
    struct Reached {
        std::vector<bool> connected;   // both ways, every stream
        std::vector<bool> in_session;  // of those, already building in a session (their hello says so)
        std::vector<std::optional<Mesh_position>> hellos;  // of the wanted peers that dialled in
        std::vector<std::uint32_t> later_epochs;  // joiners already on a later table (not waited for), else 0
    };

    Peer_links(Rank rank, Policy policy, const Stop_flag& stop, Mesh_transport::Loss_observer on_loss, Data_threads& threads);

    // Connects to the `wanted` peers at their `peers` addresses through
    // `listener` (listen), standing at `position` (its transport kind and
    // streams are the policy's), as
    // connect_peers does: a set that starts waits for every peer, a join
    // ends a join timeout after it began. Returns nullopt if a stop came
    // first; throws Transport_error if a peer disagrees about the mesh.
    std::optional<Reached> connect(const Fd& listener, std::span<const Peer_address> peers, std::vector<bool> wanted, Mesh_position position);

    // The transport the first connect made.
    Mesh_transport& transport() const { return *transport_; }

private:
    Rank rank_;
    Policy policy_;
    const Stop_flag& stop_;
    Mesh_transport::Loss_observer on_loss_;
    Data_threads& threads_;
    std::unique_ptr<Mesh_transport> transport_;
};

}  // namespace eb
