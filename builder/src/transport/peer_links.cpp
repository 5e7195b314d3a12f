#include "transport/peer_links.hpp"

#include <utility>

#include "transport/tcp/tcp_mesh.hpp"
#include "transport/transport_factory.hpp"

namespace eb {

Fd Peer_links::listen(std::uint16_t port) { return listen_for_peers(port); }

Peer_links::Peer_links(Rank rank, Policy policy, const Stop_flag& stop, Mesh_transport::Loss_observer on_loss,
                       Data_threads& threads)
    : rank_(rank), policy_(std::move(policy)), stop_(stop), on_loss_(std::move(on_loss)),
      threads_(threads) {}

std::optional<Peer_links::Reached> Peer_links::connect(const Fd& listener, std::span<const Peer_address> peers, std::vector<bool> wanted,
                                                       Mesh_position position) {
    position.verbs = policy_.transport.kind == Transport_kind::verbs;
    position.streams = policy_.transport.tcp_streams;
    auto connections = connect_peers(listener, rank_, peers, std::move(wanted), position,
                                     static_cast<int>(policy_.transport.peer_timeout_ms), policy_.join_timeout, stop_,
                                     policy_.key, resolve_host, policy_.refused);
    if (!connections) return std::nullopt;
    const Rank units = static_cast<Rank>(connections->hellos.size());
    Reached reached{std::vector<bool>(units), std::vector<bool>(units), std::move(connections->hellos),
                    std::move(connections->later_epochs)};
    for (Rank peer = 0; peer < units; ++peer) {
        reached.connected[peer] = connections->connected(peer);
        reached.in_session[peer] = reached.connected[peer] && reached.hellos[peer]->in_session;
    }
    if (transport_)
        transport_->connect(std::move(connections->mesh));
    else
        transport_ = make_transport(policy_.transport, rank_, std::move(connections->mesh), stop_, on_loss_, threads_);
    return reached;
}

}  // namespace eb
