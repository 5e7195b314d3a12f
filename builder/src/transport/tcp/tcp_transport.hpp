#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/busy_poll.hpp"
#include "base/data_threads.hpp"
#include "transport/tcp/heartbeat.hpp"
#include "transport/mesh_transport.hpp"
#include "transport/self_delivery.hpp"
#include "base/stop_flag.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace eb {

// Transport over a mesh of TCP connections. A transfer posts every operation
// non-blocking and drives them all with one poll() loop, so a unit's sends
// and receives progress together and linear shifting cannot deadlock. Bytes
// go straight between the caller's buffers and the kernel: no staging copy,
// no registration. One stream per direction carries both channels, so a
// posted data operation only moves when it is waited for, in the order the
// program waits, which is the order of the stream.
// The mesh can change between transfers (a new rank table): peers are
// connected and disconnected one by one. A peer waited for that sends no
// heartbeat for the peer timeout is lost: its process is stopped or hung,
// or the network from it is cut, none of which closes a connection.
// With S streams per peer and direction (Tcp_mesh::streams), a data
// operation of at least S * min_slice_bytes is cut into S slices, slice 0 on
// the connection the control channel uses and slice i on the i-th more one;
// both ends cut it alike, from its size alone.
// Given the unit's data threads (Data_threads, K of them), the data
// operations (slices) waited for together are dealt out over them, each with a poll() loop of its
// own: a phase's sends and receives copy on up to 2S cores at once, and the unit's
// own MFP is copied into its MEP in slices by the same threads. A peer lost on
// a worker is cut off there (its sockets shut down, its other operations
// dropped) and lost, observer called, on the transferring thread once all
// are done.
class Tcp_transport final : public Mesh_transport {
public:
    using Clock = std::chrono::steady_clock;
    // A smaller data operation goes whole on one stream: a slice costs a
    // poll set entry and a wake-up on each end, more than copying a few KiB.
    static constexpr std::size_t min_slice_bytes = 4 * 1024;

    Tcp_transport(Rank rank, Tcp_mesh mesh, const Stop_flag& stop, Loss_observer on_loss = {},
                  Liveness liveness = Liveness(),
                  Busy_poll busy_poll = Busy_poll(std::chrono::microseconds(default_busy_poll_us)),
                  Data_threads* threads = nullptr);

    Rank rank() const override { return rank_; }
    Rank units() const override { return static_cast<Rank>(mesh_.to.size()); }
    bool transfer(std::span<const Send> sends, std::span<const Receive> receives) override;
    std::unique_ptr<Registered_memory> register_memory(std::span<const std::byte> region) override;
    void post_data(std::span<const Send> sends, std::span<const Receive> receives) override;
    bool wait_data(std::span<const Rank> sent_to, std::span<const Rank> received_from) override;
    void quiesce() override;
    bool lost(Rank peer) const override { return lost_[peer]; }

    void connect(Tcp_mesh joined) override;
    void disconnect(Rank peer) override;
    void lose(Rank peer, Link_failure failure, const std::string& detail) override;
    Transport_report report() const override { return {}; }

    // A transfer with a deadline: the peers whose operations are not done by
    // then are lost, as `failure` with `detail`. For a set-up exchange with
    // peers that may not speak the protocol at all.
    struct Deadline {
        Clock::time_point at;
        Link_failure failure = Link_failure::timeout;
        std::string detail = "it did not answer the connection set-up in time";
    };
    bool transfer_until(std::span<const Send> sends, std::span<const Receive> receives, const Deadline& deadline);
    // The connections, for a transport that uses them out of band.
    const Tcp_mesh& mesh() const { return mesh_; }
    // Loses each of `peers` that has been silent too long (Liveness); for a
    // transport that waits on something else. Wake at least this often.
    void lose_silent(std::span<const Rank> peers);
    Clock::duration heartbeat_interval() const { return heartbeat_.interval(); }

private:
    struct Operation {
        int fd;
        Rank peer;
        const std::byte* out;  // set for a send
        std::byte* in;         // set for a receive
        std::size_t left;
        bool data = false;  // of the data channel: counted in traffic_
    };

    struct Loss {
        Rank peer;
        Link_failure failure;
        std::string detail;
    };
    // The operations one thread drives, and the peers it found lost.
    struct Shard {
        std::vector<Operation> operations;
        std::vector<pollfd> poll_set;
        std::vector<Loss> losses;
    };

    void post(std::span<const Send> sends, std::span<const Receive> receives);
    unsigned slices_of(std::size_t bytes) const;  // the streams a data operation of `bytes` takes
    // Posts the data send (out) or receive (in) of `bytes` with `peer`, sliced over the streams.
    void post_slices(Rank peer, const std::byte* out, std::byte* in, std::size_t bytes);
    template <typename Visit>
    void for_each_connection(Rank peer, Visit visit);  // every stream, both directions
    // Drives shards_[0, parts) on as many data threads (each copying its
    // slice of self_copy_ first, with `copy`) until all are done, then loses
    // the peers they cut off, however it ends; false if stopped first.
    bool drive_parts(unsigned parts, const Deadline* deadline, bool copy = false);
    // Drives a shard's operations until all are done; false if stopped
    // first. Safe on any thread: losses are only noted (cut_off).
    bool drive(Shard& shard, const Deadline* deadline);
    // Copies slice `part` of `parts` of self_copy_.
    void copy_to_self(unsigned part, unsigned parts) const;
    void progress(Shard& shard, Operation& operation, Clock::time_point now);  // as far as the socket allows now
    void cut_off_if_silent(Shard& shard, Rank peer, Clock::time_point now);
    // Notes a lost peer in the shard, shuts its sockets down (which wakes
    // any thread polling them) and drops its other operations everywhere.
    void cut_off(Shard& shard, Rank peer, Link_failure failure, std::string detail);
    bool cut(Rank peer) const { return lost_[peer] || cut_[peer].load(std::memory_order_relaxed); }
    void lose_noted(Shard& shard);  // on the transferring thread
    void close_connections(Rank peer);  // at once, though the heartbeat holds copies

    Rank rank_;
    Tcp_mesh mesh_;
    const Stop_flag& stop_;
    Loss_observer on_loss_;
    Liveness liveness_;
    Busy_poll busy_poll_;
    std::vector<bool> lost_;  // written on the transferring thread only, while no shard runs
    std::unique_ptr<std::atomic<bool>[]> cut_;  // by rank: cut off in the transfer under way
    std::vector<Shard> shards_;  // one per data thread, reused across transfers
    std::vector<Operation> posted_data_;  // posted, not yet waited for
    Self_delivery self_;
    Self_delivery::Copy self_copy_;  // the data send to self, made when waited for
    Heartbeat heartbeat_;
    Data_threads* threads_;  // null: the transferring thread alone
};

}  // namespace eb
