#include "local_mesh.hpp"

#include <stdexcept>
#include <thread>

#include "test_support.hpp"

namespace eb::test {

std::vector<Tcp_mesh> connect_local_mesh(Rank units, const Stop_flag& stop, const std::vector<bool>& live,
                                         unsigned streams) {
    std::vector<Peer_address> peers;
    for (const std::uint16_t port : free_ports(units)) peers.push_back({"127.0.0.1", port});
    std::vector<Fd> listeners;
    for (const Peer_address& peer : peers) listeners.push_back(listen_for_peers(peer.port));

    std::vector<std::optional<Tcp_mesh>> meshes(units);
    {
        std::vector<std::jthread> threads;
        for (Rank rank = 0; rank < units; ++rank)
            if (live.empty() || live[rank])
                threads.emplace_back(
                    [&, rank] { meshes[rank] = connect_mesh(std::move(listeners[rank]), rank, peers, live, stop, streams); });
    }
    std::vector<Tcp_mesh> connected;
    for (Rank rank = 0; rank < units; ++rank) {
        auto& mesh = meshes[rank];
        if (!live.empty() && !live[rank]) {
            connected.emplace_back();  // a dummy: no unit, no connections
            continue;
        }
        if (!mesh) throw std::runtime_error("connect_local_mesh: stopped before the mesh was up");
        connected.push_back(std::move(*mesh));
    }
    return connected;
}

}  // namespace eb::test
