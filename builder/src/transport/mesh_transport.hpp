#pragma once

#include <functional>
#include <string>

#include "transport/data_traffic.hpp"
#include "transport/transport.hpp"
#include "transport/transport_report.hpp"

namespace eb {

struct Tcp_mesh;  // transport/tcp/tcp_mesh.hpp: only the transports and Peer_links open it

// A transport over the unit's TCP mesh, which a unit grows and shrinks as
// rank tables change: joined peers' connections are added, peers that left
// are disconnected, peers given up on are lost. The TCP mesh is the data
// path itself (Tcp_transport) or the out-of-band channel that sets up RDMA
// queue pairs and tells when a peer's process is gone (Verbs_transport).
class Mesh_transport : public Transport {
public:
    // Called once per lost peer, from the transferring thread.
    using Loss_observer = std::function<void(Rank peer, Link_failure failure, const std::string& detail)>;

    // Adds the connections of peers that joined; clears their lost mark.
    virtual void connect(Tcp_mesh joined) = 0;
    // Closes the connections to `peer` (it left the mesh) and clears its lost mark.
    virtual void disconnect(Rank peer) = 0;

    // What it runs on and how each peer's connection stands; from the
    // transferring thread.
    virtual Transport_report report() const = 0;

    // Counts the data channel's traffic into `traffic` from now on; it must
    // outlive the transport.
    void count_traffic(Data_traffic& traffic) { traffic_ = &traffic; }

protected:
    Data_traffic* traffic_ = nullptr;  // null: not counted
};

}  // namespace eb
