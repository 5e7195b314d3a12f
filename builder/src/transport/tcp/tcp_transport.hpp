#pragma once

#include <poll.h>

#include <functional>
#include <string>
#include <vector>

#include "stop_flag.hpp"
#include "tcp_mesh.hpp"
#include "transport.hpp"

namespace eb {

// Transport over a mesh of TCP connections. A transfer posts every operation
// non-blocking and drives them all with one poll() loop, so a unit's sends
// and receives progress together and linear shifting cannot deadlock. Bytes
// go straight between the caller's buffers and the kernel: no staging copy.
// The mesh can change between transfers (a new rank table): peers are
// connected and disconnected one by one.
class Tcp_transport final : public Transport {
public:
    // Called once per lost peer, from the transferring thread.
    using Loss_observer = std::function<void(Rank peer, Link_failure failure, const std::string& detail)>;

    Tcp_transport(Rank rank, Tcp_mesh mesh, const Stop_flag& stop, Loss_observer on_loss = {});

    Rank rank() const override { return rank_; }
    Rank units() const override { return static_cast<Rank>(mesh_.to.size()); }
    bool transfer(std::span<const Send> sends, std::span<const Receive> receives) override;
    bool lost(Rank peer) const override { return lost_[peer]; }

    // Adds the connections of peers that joined; clears their lost mark.
    void connect(Tcp_mesh joined);
    // Closes the connections to `peer` (it left the mesh) and clears its lost mark.
    void disconnect(Rank peer);
    // Marks `peer` lost (once: later calls do nothing), closes its
    // connections and tells the observer; a failed transfer does this, and a
    // unit that gives up on a joiner.
    void lose(Rank peer, Link_failure failure, const std::string& detail);

private:
    struct Operation {
        int fd;
        Rank peer;
        const std::byte* out;  // set for a send
        std::byte* in;         // set for a receive
        std::size_t left;
    };

    void post(std::span<const Send> sends, std::span<const Receive> receives);
    void progress(Operation& operation);  // as far as the socket allows now

    Rank rank_;
    Tcp_mesh mesh_;
    const Stop_flag& stop_;
    Loss_observer on_loss_;
    std::vector<bool> lost_;
    std::vector<Operation> operations_;  // reused across transfers
    std::vector<pollfd> poll_set_;
};

}  // namespace eb
