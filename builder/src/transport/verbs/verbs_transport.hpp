#pragma once

#include <infiniband/verbs.h>
#include <poll.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/busy_poll.hpp"
#include "transport/mesh_transport.hpp"
#include "transport/injected_fault.hpp"
#include "transport/self_delivery.hpp"
#include "base/stop_flag.hpp"
#include "transport/tcp/tcp_transport.hpp"
#include "transport/verbs/verbs_choices.hpp"

namespace eb {

// Transport over libibverbs reliable-connected (RC) queue pairs, following
// the lifecycle of rdma-core's rc_pingpong: open the device, protection
// domain, completion channel and one completion queue; per peer two QPs
// (control and data) taken RESET -> INIT, their addresses (QPN, PSN, GID or
// LID, MTU) exchanged over the unit's TCP mesh, then RTR -> RTS. The TCP
// connections stay open: a peer process that dies closes them, which is the
// fastest word of its loss.
//
// Data: SEND/RECV (docs/verbs.md says why not RDMA WRITE WITH IMMEDIATE):
// the BU posts a receive straight at each MFP's offset in the MEP, in
// memory registered once, so an MFP lands in place with no copy; the RU
// sends from its registered source. Each data receive posted sends the RU a
// credit (a zero-byte SEND with an immediate, on the control QP), and the RU
// holds its data send until the credit is there: an MFP never reaches a
// receive not yet posted (no RNR NAK, whose retry timer stalls the link).
// Control: small messages, copied through registered slots; every peer
// keeps `control_slots` receives posted, so a peer that runs ahead never
// waits for a receive.
//
// A completion in error, an asynchronous QP event or a closed TCP connection
// loses the peer: its QPs are destroyed at once (nothing it was posted into
// is touched afterwards) and the others go on. A QP retries for at most the
// peer timeout (qp_timeouts). Waiting polls the completion queue, then
// sleeps on the completion channel together with the stop flag, the
// device's asynchronous events and the TCP connections.
class Verbs_transport final : public Mesh_transport {
public:
    struct Settings {
        std::string device;         // empty: the only device there is
        std::uint8_t port = 1;
        int gid_index = -1;         // < 0: picked (pick_gid_index)
        std::uint32_t peer_timeout_ms = 1000;
        std::uint32_t setup_timeout_ms = 5000;  // a peer that sends no address by then is lost
        std::uint32_t busy_poll_us = default_busy_poll_us;  // polls of an idle completion queue before sleeping
        std::optional<Injected_fault> fault;  // --inject-fault: tests and qualification only
    };

    // Opens the device and connects queue pairs with every peer of `mesh`.
    // Throws Transport_error if the device cannot be used (named, with the
    // fix); Stopped if stopped while connecting.
    Verbs_transport(Rank rank, Tcp_mesh mesh, const Stop_flag& stop, Settings settings, Loss_observer on_loss = {});
    // Registrations it handed out must be gone first.
    ~Verbs_transport() override = default;
    Verbs_transport(const Verbs_transport&) = delete;
    Verbs_transport& operator=(const Verbs_transport&) = delete;

    Rank rank() const override { return rank_; }
    Rank units() const override { return static_cast<Rank>(peers_.size()); }
    bool transfer(std::span<const Send> sends, std::span<const Receive> receives) override;
    std::unique_ptr<Registered_memory> register_memory(std::span<const std::byte> region) override;
    void post_data(std::span<const Send> sends, std::span<const Receive> receives) override;
    bool wait_data(std::span<const Rank> sent_to, std::span<const Rank> received_from) override;
    void quiesce() override;
    bool lost(Rank peer) const override { return tcp_.lost(peer); }

    void connect(Tcp_mesh joined) override;
    void disconnect(Rank peer) override;
    void lose(Rank peer, Link_failure failure, const std::string& detail) override;
    Transport_report report() const override;

    static constexpr std::uint32_t control_slots = 8;
    // Credits sent to one peer and not yet acknowledged: one per cycle, so
    // more than one only while a credit's ACK is retransmitted.
    static constexpr std::uint32_t max_credits_unacked = 3;

private:
    enum Channel : std::uint8_t { control = 0, data = 1 };
    enum Direction : std::uint8_t { sending = 0, receiving = 1 };

    // Owns a verbs object: freed by `free_function`.
    template <auto free_function>
    struct Deleter {
        template <typename T>
        void operator()(T* object) const { free_function(object); }
    };
    using Qp = std::unique_ptr<ibv_qp, Deleter<ibv_destroy_qp>>;

    // A data send waiting for the peer's credit.
    struct Held_send {
        const std::byte* data;
        std::uint32_t bytes, lkey;
        std::chrono::steady_clock::time_point since{};  // set once it waits for its credit
    };
    struct Peer {
        Qp qps[2];                     // by Channel
        std::uint32_t generation = 0;  // completions of older QPs are stale
        bool busy[2][2] = {};          // [Channel][Direction]: posted (or held), not complete
        std::uint32_t data_receive_bytes = 0;
        std::uint32_t data_send_bytes = 0;  // of the data send posted last
        std::deque<std::pair<std::uint32_t, std::uint32_t>> arrived;  // control: (slot, bytes), oldest first
        std::uint32_t credits = 0;          // data receives the peer posted for this unit, not yet sent into
        std::optional<Held_send> held;      // the data send waiting for a credit
        std::uint32_t credits_unacked = 0;  // credits sent to the peer, not yet complete
    };
    class Registration;
    struct Region {
        const std::byte* begin;
        const std::byte* end;
        std::uint32_t lkey;
    };

    void open_device();
    // Takes the connections of `joined` (dropping older queue pairs with
    // those peers) and sets their queue pairs up.
    void join(Tcp_mesh joined, Link_failure late, const std::string& late_detail);
    // Exchanges queue-pair addresses with `joined`; a peer that sends none
    // within the set-up timeout is lost as `late`.
    void set_up(const std::vector<Rank>& joined, Link_failure late, const std::string& late_detail);
    Qp create_qp();
    void connect_qp(ibv_qp* qp, const Qp_address& remote, std::uint32_t remote_qpn, std::uint32_t remote_psn,
                    std::uint32_t local_psn);
    void post_control_receive(Rank peer, std::uint32_t slot);
    void post_send(Rank peer, Channel channel, const std::byte* data, std::uint32_t bytes, std::uint32_t lkey);
    // Tells `peer` a data receive for it is posted; takes one it sent.
    void send_credit(Rank peer);
    void take_credit(Rank peer, std::uint32_t immediate);
    // Posts the held data send to `peer` if it has a credit for it.
    void send_held(Rank peer);
    // Whether the --inject-fault fault is due at this data operation with
    // `peer` (a receive for qp_error, a send for short_mfp): fires once.
    bool fault_due(Rank peer, Injected_fault::Kind kind);
    void move_to_error(Rank peer);
    std::uint32_t lkey_of(std::span<const std::byte> bytes) const;
    std::byte* control_slot(Rank peer, Direction direction, std::uint32_t slot);
    std::uint64_t work_id(Rank peer, Channel channel, Direction direction, std::uint32_t slot = 0) const;

    // Progress until done() or stopped (false), waiting on the peers in
    // `waited`. Handles completions, async events and those peers' closed
    // connections on the way.
    template <typename Done>
    bool progress_until(Done done, const std::vector<Rank>& waited);
    bool poll_completions();  // true if any arrived
    void handle(const ibv_wc& completion);
    void wait_for_events(const std::vector<Rank>& waited);
    void handle_async_events();
    void check_connection(Rank peer);
    // Called by the TCP side once per lost peer: drops its queue pairs.
    void forget_lost_peer(Rank peer, Link_failure failure, const std::string& detail);
    void drop_qps(Peer& peer);
    void remove_region(const Registration& registration);

    Rank rank_;
    const Stop_flag& stop_;
    Settings settings_;
    Loss_observer on_loss_;
    Qp_timeouts timeouts_;
    std::size_t control_slot_bytes_;

    // Device resources, in the order rc_pingpong creates them; freed in
    // reverse, after the queue pairs (peers_, declared last).
    std::unique_ptr<ibv_context, Deleter<ibv_close_device>> context_;
    std::unique_ptr<ibv_pd, Deleter<ibv_dealloc_pd>> pd_;
    std::unique_ptr<ibv_comp_channel, Deleter<ibv_destroy_comp_channel>> channel_;
    std::unique_ptr<ibv_cq, Deleter<ibv_destroy_cq>> cq_;
    std::vector<std::byte> control_memory_;  // per peer: one send slot, control_slots receive slots
    std::unique_ptr<ibv_mr, Deleter<ibv_dereg_mr>> control_mr_;
    ibv_port_attr port_{};
    int gid_index_ = -1;
    ibv_gid gid_{};

    Tcp_transport tcp_;  // the mesh: set-up exchange and loss of a peer's process
    std::vector<Peer> peers_;
    std::vector<Region> regions_;  // registered, by begin
    Self_delivery self_;
    bool quiesced_ = false;
    std::uint64_t fault_operations_ = 0;  // of the --inject-fault kind with its peer, posted so far
    std::vector<pollfd> watch_;  // reused
    std::vector<Rank> waited_;   // reused: the peers a wait is for
    std::vector<bool> taken_;    // reused: the receives of a control transfer that took their message
};

}  // namespace eb
