#include "transport/verbs/verbs_transport.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>

#include "base/log.hpp"
#include "base/socket.hpp"

namespace eb {
namespace {

constexpr int completions_per_poll = 16;
// RNR NAK timer code 12 (0.64 ms, as rc_pingpong) and unlimited RNR retries:
// a receive not posted yet is waited for, never a failure (data sends wait
// for their credit, control receives are posted ahead: a safety net; the
// peer timeout covers a peer that is gone).
constexpr std::uint8_t min_rnr_timer = 12;
constexpr std::uint8_t rnr_retry_forever = 7;
constexpr std::uint32_t max_inline = 64;
// A credit is a zero-byte SEND with this immediate ("CRDT"); no other
// control message carries one. Its send's work id has this slot.
constexpr std::uint32_t credit_immediate = 0x43524454;
constexpr std::uint32_t credit_slot = 1;

std::string verbs_error(const std::string& what, int error) { return what + ": " + error_text(error); }

const char* port_state_name(ibv_port_state state) {
    switch (state) {
        case IBV_PORT_DOWN: return "DOWN";
        case IBV_PORT_INIT: return "INIT";
        case IBV_PORT_ARMED: return "ARMED";
        case IBV_PORT_ACTIVE: return "ACTIVE";
        case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
        default: return "NOP";
    }
}

const char* qp_state_name(ibv_qp_state state) {
    switch (state) {
        case IBV_QPS_RESET: return "RESET";
        case IBV_QPS_INIT: return "INIT";
        case IBV_QPS_RTR: return "RTR";
        case IBV_QPS_RTS: return "RTS";
        case IBV_QPS_SQD: return "SQD";
        case IBV_QPS_SQE: return "SQE";
        case IBV_QPS_ERR: return "ERR";
        default: return "UNKNOWN";
    }
}

void set_non_blocking(int fd, const char* what) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        throw Transport_error(verbs_error(std::string("making the ") + what + " non-blocking", errno));
}

// Registering memory pins it: allowed up to RLIMIT_MEMLOCK without
// CAP_IPC_LOCK. Take the hard limit, which the container runtime sets.
void raise_memlock_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        ::setrlimit(RLIMIT_MEMLOCK, &limit);
    }
}

std::string memlock_text() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return "unknown";
    return limit.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(limit.rlim_cur >> 10) + " KiB";
}

std::uint32_t random_psn() {
    static thread_local std::mt19937 generator{std::random_device{}()};
    return generator() & 0xffffff;
}

}  // namespace

// Memory registered for the data channel; deregistered when dropped, which
// must be before the transport goes.
class Verbs_transport::Registration final : public Registered_memory {
public:
    Registration(Verbs_transport& transport, ibv_mr* mr) : transport_(transport), mr_(mr) {}
    ~Registration() override {
        transport_.remove_region(*this);
        ibv_dereg_mr(mr_);
    }
    ibv_mr* mr() const { return mr_; }

private:
    Verbs_transport& transport_;
    ibv_mr* mr_;
};

Verbs_transport::Verbs_transport(Rank rank, Tcp_mesh mesh, const Stop_flag& stop, Settings settings,
                                 Loss_observer on_loss)
    : rank_(rank),
      stop_(stop),
      settings_(std::move(settings)),
      on_loss_(std::move(on_loss)),
      timeouts_(qp_timeouts(settings_.peer_timeout_ms)),
      control_slot_bytes_((max_control_bytes(static_cast<Rank>(mesh.to.size())) + 63) / 64 * 64),
      tcp_(rank, Tcp_mesh::empty(mesh.to.size()), stop,
           [this](Rank peer, Link_failure failure, const std::string& detail) { forget_lost_peer(peer, failure, detail); },
           {std::chrono::milliseconds(settings_.peer_timeout_ms), std::chrono::milliseconds(settings_.setup_timeout_ms)},
           Busy_poll(std::chrono::microseconds(settings_.busy_poll_us))),
      peers_(mesh.to.size()),
      self_(rank, static_cast<Rank>(mesh.to.size()), "Verbs_transport") {
    if (settings_.fault)
        log_warning("fault injection armed (--inject-fault ", injected_fault_text(*settings_.fault), ")",
                    settings_.fault->peer == rank_ || settings_.fault->peer >= peers_.size()
                        ? ": rank " + std::to_string(settings_.fault->peer) + " is no peer of this unit, it never fires"
                        : std::string());
    open_device();
    join(std::move(mesh), Link_failure::timeout, "it did not answer the connection set-up in time");
}

void Verbs_transport::open_device() {
    raise_memlock_limit();
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr) throw Transport_error(verbs_error("listing RDMA devices", errno));
    std::string names;
    ibv_device* chosen = nullptr;
    for (int i = 0; i < count; ++i) {
        const std::string name = ibv_get_device_name(list[i]);
        names += (names.empty() ? "" : ", ") + name;
        if (name == settings_.device || (settings_.device.empty() && count == 1)) chosen = list[i];
    }
    if (chosen != nullptr) context_.reset(ibv_open_device(chosen));
    const int open_error = errno;
    ibv_free_device_list(list);
    if (chosen == nullptr)
        throw Transport_error(
            count == 0 ? std::string("no RDMA device found (ibv_get_device_list is empty): --transport verbs needs one; "
                                     "in a pod, request the RDMA device plugin's resource, or use --transport tcp")
            : settings_.device.empty()
                ? "several RDMA devices (" + names + "): name one with --rdma-device or EB_RDMA_DEVICE"
                : "RDMA device " + settings_.device + " not found; this host has " + names);
    if (context_ == nullptr) throw Transport_error(verbs_error("opening RDMA device " + settings_.device, open_error));
    settings_.device = ibv_get_device_name(chosen);
    const std::string where = "port " + std::to_string(settings_.port) + " of " + settings_.device;
    if (const int error = ibv_query_port(context_.get(), settings_.port, &port_); error != 0)
        throw Transport_error(verbs_error("querying " + where, error));
    if (port_.state != IBV_PORT_ACTIVE)
        throw Transport_error(where + " is " + port_state_name(port_.state) +
                              ", not ACTIVE: check its link (ibv_devinfo) before starting the unit");
    if (port_.link_layer == IBV_LINK_LAYER_ETHERNET) {
        gid_index_ = settings_.gid_index;
        if (gid_index_ < 0) {
            std::vector<ibv_gid_entry> entries(port_.gid_tbl_len);
            const ssize_t found = ibv_query_gid_table(context_.get(), entries.data(), entries.size(), 0);
            if (found < 0) throw Transport_error(verbs_error("reading the GID table of " + where, static_cast<int>(-found)));
            std::vector<Gid_candidate> candidates;
            for (ssize_t i = 0; i < found; ++i) {
                const ibv_gid_entry& entry = entries[static_cast<std::size_t>(i)];
                if (entry.port_num != settings_.port) continue;
                Gid_candidate candidate{entry.gid_index,
                                        entry.gid_type == IBV_GID_TYPE_ROCE_V2   ? Gid_kind::roce_v2
                                        : entry.gid_type == IBV_GID_TYPE_ROCE_V1 ? Gid_kind::roce_v1
                                                                                 : Gid_kind::infiniband,
                                        {}};
                std::memcpy(candidate.gid.data(), entry.gid.raw, 16);
                candidates.push_back(candidate);
            }
            const std::optional<std::uint32_t> picked = pick_gid_index(candidates);
            if (!picked)
                throw Transport_error("no usable RoCE GID on " + where +
                                      ": give its network interface an IP address, or pick one with --gid-index");
            gid_index_ = static_cast<int>(*picked);
        }
        if (const int error = ibv_query_gid(context_.get(), settings_.port, gid_index_, &gid_); error != 0)
            throw Transport_error(verbs_error("reading GID " + std::to_string(gid_index_) + " of " + where, error));
    }
    pd_.reset(ibv_alloc_pd(context_.get()));
    if (pd_ == nullptr) throw Transport_error(verbs_error("allocating a protection domain on " + settings_.device, errno));
    channel_.reset(ibv_create_comp_channel(context_.get()));
    if (channel_ == nullptr) throw Transport_error(verbs_error("creating a completion channel", errno));
    set_non_blocking(channel_->fd, "completion channel");
    set_non_blocking(context_->async_fd, "asynchronous event queue");
    // Per peer: a control send and the credits not yet acknowledged,
    // control_slots control receives, a data send and receive; twice that,
    // for the flushed work of queue pairs destroyed (a lost peer, a rejoin)
    // whose completions may still be queued.
    const int depth = static_cast<int>(2 * peers_.size() * (control_slots + max_credits_unacked + 3) + 64);
    cq_.reset(ibv_create_cq(context_.get(), depth, nullptr, channel_.get(), 0));
    if (cq_ == nullptr) throw Transport_error(verbs_error("creating a completion queue of " + std::to_string(depth), errno));
    control_memory_.resize(peers_.size() * (1 + control_slots) * control_slot_bytes_);
    control_mr_.reset(ibv_reg_mr(pd_.get(), control_memory_.data(), control_memory_.size(), IBV_ACCESS_LOCAL_WRITE));
    if (control_mr_ == nullptr)
        throw Transport_error(verbs_error("registering " + std::to_string(control_memory_.size()) +
                                              " bytes of control buffers (locked-memory limit " + memlock_text() +
                                              "; raise RLIMIT_MEMLOCK or give the process CAP_IPC_LOCK)",
                                          errno));
    log_info("verbs transport on ", settings_.device, " port ", int(settings_.port), " (",
             port_.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE, GID index " + std::to_string(gid_index_)
                                                         : "InfiniBand, LID " + std::to_string(port_.lid),
             ", MTU ", 128 << port_.active_mtu, "); a silent peer is given up after ",
             static_cast<int>(give_up_ms(timeouts_)), " ms");
}

std::byte* Verbs_transport::control_slot(Rank peer, Direction direction, std::uint32_t slot) {
    const std::size_t index = peer * (1 + control_slots) + (direction == sending ? 0 : 1 + slot);
    return control_memory_.data() + index * control_slot_bytes_;
}

// wr_id: generation (24 bits) | slot (8) | peer (30) | channel (1) | direction (1).
std::uint64_t Verbs_transport::work_id(Rank peer, Channel channel, Direction direction, std::uint32_t slot) const {
    return (std::uint64_t(peers_[peer].generation & 0xffffff) << 40) | (std::uint64_t(slot & 0xff) << 32) |
           (std::uint64_t(peer) << 2) | (std::uint64_t(channel) << 1) | direction;
}

Verbs_transport::Qp Verbs_transport::create_qp() {
    ibv_qp_init_attr init{};
    init.send_cq = cq_.get();
    init.recv_cq = cq_.get();
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 1 + max_credits_unacked;  // control: a message and the credits
    init.cap.max_recv_wr = control_slots;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = max_inline;
    Qp qp(ibv_create_qp(pd_.get(), &init));
    if (!qp) throw Transport_error(verbs_error("creating a queue pair on " + settings_.device, errno));
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = settings_.port;
    attr.qp_access_flags = 0;  // SEND/RECV only: no peer may write or read this unit's memory
    if (const int error = ibv_modify_qp(qp.get(), &attr,
                                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        error != 0)
        throw Transport_error(verbs_error("moving a queue pair to INIT", error));
    return qp;
}

void Verbs_transport::connect_qp(ibv_qp* qp, const Qp_address& remote, std::uint32_t remote_qpn,
                                 std::uint32_t remote_psn, std::uint32_t local_psn) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = static_cast<ibv_mtu>(std::min<int>(port_.active_mtu, remote.mtu));
    attr.dest_qp_num = remote_qpn;
    attr.rq_psn = remote_psn;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = min_rnr_timer;
    attr.ah_attr.port_num = settings_.port;
    attr.ah_attr.dlid = remote.lid;
    if (remote.has_gid != 0) {
        attr.ah_attr.is_global = 1;
        attr.ah_attr.grh.hop_limit = 64;
        attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index_);
        std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    }
    if (const int error = ibv_modify_qp(qp, &attr,
                                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        error != 0)
        throw Transport_error(verbs_error("moving a queue pair to RTR", error));
    attr = {};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = timeouts_.timeout;
    attr.retry_cnt = timeouts_.retry_count;
    attr.rnr_retry = rnr_retry_forever;
    attr.sq_psn = local_psn;
    attr.max_rd_atomic = 1;
    if (const int error = ibv_modify_qp(qp, &attr,
                                        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                            IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
        error != 0)
        throw Transport_error(verbs_error("moving a queue pair to RTS", error));
}

void Verbs_transport::connect(Tcp_mesh joined) {
    // They joined a running set: one that cannot finish that is given up on
    // as a join that timed out, as over TCP.
    join(std::move(joined), Link_failure::join_timeout,
         "it did not send its queue-pair addresses within the join timeout");
}

void Verbs_transport::join(Tcp_mesh joined, Link_failure late, const std::string& late_detail) {
    std::vector<Rank> peers;
    for (Rank peer = 0; peer < units(); ++peer)
        if (joined.to[peer] && joined.from[peer]) {
            drop_qps(peers_[peer]);
            peers.push_back(peer);
        }
    tcp_.connect(std::move(joined));
    set_up(peers, late, late_detail);
}

void Verbs_transport::set_up(const std::vector<Rank>& joined, Link_failure late, const std::string& late_detail) {
    std::vector<Qp_address> local(units()), remote(units());
    std::vector<Send> sends;
    std::vector<Receive> receives;
    const std::uint8_t link_layer = port_.link_layer == IBV_LINK_LAYER_ETHERNET ? 2 : 1;
    for (const Rank peer : joined) {
        Peer& state = peers_[peer];
        state.qps[control] = create_qp();
        state.qps[data] = create_qp();
        Qp_address& mine = local[peer];
        mine.lid = port_.lid;
        mine.rank = rank_;
        mine.control_qpn = state.qps[control]->qp_num;
        mine.data_qpn = state.qps[data]->qp_num;
        mine.control_psn = random_psn();
        mine.data_psn = random_psn();
        mine.has_gid = gid_index_ >= 0 ? 1 : 0;
        std::memcpy(mine.gid.data(), gid_.raw, 16);
        mine.mtu = static_cast<std::uint8_t>(port_.active_mtu);
        mine.link_layer = link_layer;
        sends.push_back({peer, std::as_bytes(std::span(&mine, 1))});
        receives.push_back({peer, std::as_writable_bytes(std::span(&remote[peer], 1))});
    }
    const Tcp_transport::Deadline deadline{
        Tcp_transport::Clock::now() + std::chrono::milliseconds(settings_.setup_timeout_ms), late, late_detail};
    if (!tcp_.transfer_until(sends, receives, deadline)) throw Stopped();
    for (const Rank peer : joined) {
        if (lost(peer)) continue;
        if (const auto problem = check_qp_address(remote[peer], peer, link_layer)) {
            lose(peer, Link_failure::error, *problem);
            continue;
        }
        Peer& state = peers_[peer];
        try {
            // Receives first (a QP in INIT takes them): the peer may send as
            // soon as its side is in RTS.
            for (std::uint32_t slot = 0; slot < control_slots; ++slot) post_control_receive(peer, slot);
            connect_qp(state.qps[control].get(), remote[peer], remote[peer].control_qpn, remote[peer].control_psn,
                       local[peer].control_psn);
            connect_qp(state.qps[data].get(), remote[peer], remote[peer].data_qpn, remote[peer].data_psn,
                       local[peer].data_psn);
        } catch (const Transport_error& error) {
            lose(peer, Link_failure::error, error.what());
        }
    }
}

void Verbs_transport::post_control_receive(Rank peer, std::uint32_t slot) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(control_slot(peer, receiving, slot)),
                static_cast<std::uint32_t>(control_slot_bytes_), control_mr_->lkey};
    ibv_recv_wr request{};
    request.wr_id = work_id(peer, control, receiving, slot);
    request.sg_list = &sge;
    request.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (const int error = ibv_post_recv(peers_[peer].qps[control].get(), &request, &bad); error != 0)
        throw Transport_error(verbs_error("posting a control receive for rank " + std::to_string(peer), error));
}

void Verbs_transport::post_send(Rank peer, Channel channel, const std::byte* bytes, std::uint32_t size,
                                std::uint32_t lkey) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(bytes), size, lkey};
    ibv_send_wr request{};
    request.wr_id = work_id(peer, channel, sending);
    request.sg_list = &sge;
    request.num_sge = size == 0 ? 0 : 1;
    request.opcode = IBV_WR_SEND;
    request.send_flags = IBV_SEND_SIGNALED | (size <= max_inline ? IBV_SEND_INLINE : 0);
    ibv_send_wr* bad = nullptr;
    if (const int error = ibv_post_send(peers_[peer].qps[channel].get(), &request, &bad); error != 0)
        throw Transport_error(verbs_error("posting a send to rank " + std::to_string(peer), error));
    peers_[peer].busy[channel][sending] = true;
}

void Verbs_transport::send_credit(Rank rank) {
    Peer& peer = peers_[rank];
    if (peer.credits_unacked == max_credits_unacked) {
        // Their ACKs are being retransmitted: one completes, or the QP's
        // retries run out and the peer is lost, within the peer timeout.
        waited_.assign(1, rank);
        if (!progress_until([&] { return lost(rank) || peer.credits_unacked < max_credits_unacked; }, waited_) ||
            lost(rank))
            return;
    }
    ibv_send_wr request{};
    request.wr_id = work_id(rank, control, sending, credit_slot);
    request.opcode = IBV_WR_SEND_WITH_IMM;
    request.imm_data = htonl(credit_immediate);
    request.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (const int error = ibv_post_send(peer.qps[control].get(), &request, &bad); error != 0)
        throw Transport_error(verbs_error("posting a credit to rank " + std::to_string(rank), error));
    ++peer.credits_unacked;
}

void Verbs_transport::take_credit(Rank rank, std::uint32_t immediate) {
    if (immediate != credit_immediate) {
        char text[16];
        std::snprintf(text, sizeof text, "0x%08x", immediate);
        lose(rank, Link_failure::error,
             std::string("it sent a control message with immediate data ") + text +
                 " where only credits carry one: the units speak different protocols");
        return;
    }
    ++peers_[rank].credits;
    send_held(rank);
}

void Verbs_transport::send_held(Rank rank) {
    Peer& peer = peers_[rank];
    if (!peer.held || peer.credits == 0) return;
    const Held_send held = *peer.held;
    peer.held.reset();
    --peer.credits;
    post_send(rank, data, held.data, held.bytes, held.lkey);
    if (held.since != std::chrono::steady_clock::time_point{} && traffic_) add_time_since(traffic_->held_ns, held.since);
}

bool Verbs_transport::transfer(std::span<const Send> sends, std::span<const Receive> receives) {
    if (stop_.requested()) return false;
    if (quiesced_) throw std::logic_error("Verbs_transport: used after quiesce");
    self_.check_ranks(sends, receives);
    self_.transfer(sends, receives);
    for (const Send& send : sends) {
        if (send.data.size() > control_slot_bytes_)
            throw std::logic_error("Verbs_transport: a control message of " + std::to_string(send.data.size()) +
                                   " bytes is over " + std::to_string(control_slot_bytes_));
        if (send.peer == rank_ || lost(send.peer)) continue;
        std::byte* slot = control_slot(send.peer, sending, 0);
        std::memcpy(slot, send.data.data(), send.data.size());
        post_send(send.peer, control, slot, static_cast<std::uint32_t>(send.data.size()), control_mr_->lkey);
    }
    // Receives take the peer's messages in the order they arrived, which is
    // the order the peer sent them: the protocol's order.
    taken_.assign(receives.size(), false);
    // Only the peers with something still pending are waited for: one that
    // delivered its part and closed (it finished the set's last round
    // first) is no loss.
    return progress_until([&] {
        bool done = true;
        waited_.clear();
        for (std::size_t i = 0; i < receives.size(); ++i) {
            const Receive& receive = receives[i];
            if (taken_[i] || receive.peer == rank_ || lost(receive.peer)) continue;
            Peer& peer = peers_[receive.peer];
            if (peer.arrived.empty()) {
                done = false;
                waited_.push_back(receive.peer);
                continue;
            }
            const auto [slot, bytes] = peer.arrived.front();
            peer.arrived.pop_front();
            taken_[i] = true;
            if (bytes != receive.into.size()) {
                lose(receive.peer, Link_failure::error,
                     "it sent a control message of " + std::to_string(bytes) + " bytes where " +
                         std::to_string(receive.into.size()) + " were agreed");
                continue;
            }
            std::memcpy(receive.into.data(), control_slot(receive.peer, receiving, slot), bytes);
            post_control_receive(receive.peer, slot);
        }
        for (const Send& send : sends)
            if (send.peer != rank_ && !lost(send.peer) && peers_[send.peer].busy[control][sending]) {
                done = false;
                waited_.push_back(send.peer);
            }
        return done;
    }, waited_);
}

std::unique_ptr<Registered_memory> Verbs_transport::register_memory(std::span<const std::byte> region) {
    // Local write: the device lands receives in it. No remote access: SEND/RECV only.
    ibv_mr* mr = ibv_reg_mr(pd_.get(), const_cast<std::byte*>(region.data()), region.size(), IBV_ACCESS_LOCAL_WRITE);
    if (mr == nullptr)
        throw Transport_error(verbs_error("registering " + std::to_string(region.size()) + " bytes with " +
                                              settings_.device + " (locked-memory limit " + memlock_text() +
                                              "; raise RLIMIT_MEMLOCK, e.g. ulimit -l unlimited, or give the process "
                                              "CAP_IPC_LOCK)",
                                          errno));
    auto registration = std::make_unique<Registration>(*this, mr);
    const Region entry{region.data(), region.data() + region.size(), mr->lkey};
    regions_.insert(std::upper_bound(regions_.begin(), regions_.end(), entry,
                                     [](const Region& a, const Region& b) { return a.begin < b.begin; }),
                    entry);
    return registration;
}

void Verbs_transport::remove_region(const Registration& registration) {
    std::erase_if(regions_, [&](const Region& region) { return region.lkey == registration.mr()->lkey; });
}

std::uint32_t Verbs_transport::lkey_of(std::span<const std::byte> bytes) const {
    auto after = std::upper_bound(regions_.begin(), regions_.end(), bytes.data(),
                                  [](const std::byte* address, const Region& region) { return address < region.begin; });
    for (auto region = std::make_reverse_iterator(after); region != regions_.rend(); ++region)
        if (region->begin <= bytes.data() && bytes.data() + bytes.size() <= region->end) return region->lkey;
    throw std::logic_error("Verbs_transport: " + std::to_string(bytes.size()) +
                           " bytes of data lie outside the registered memory; register the buffer's regions first");
}

void Verbs_transport::post_data(std::span<const Send> sends, std::span<const Receive> receives) {
    if (quiesced_) throw std::logic_error("Verbs_transport: used after quiesce");
    self_.check_ranks(sends, receives);
    for (const Receive& receive : receives) {
        if (receive.peer == rank_) {
            self_.post_receive(receive.into);
            continue;
        }
        if (lost(receive.peer)) continue;
        Peer& peer = peers_[receive.peer];
        if (peer.busy[data][receiving])
            throw std::logic_error("Verbs_transport: a second data receive from rank " + std::to_string(receive.peer));
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(receive.into.data()),
                    static_cast<std::uint32_t>(receive.into.size()), lkey_of(receive.into)};
        ibv_recv_wr request{};
        request.wr_id = work_id(receive.peer, data, receiving);
        request.sg_list = &sge;
        request.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        if (const int error = ibv_post_recv(peer.qps[data].get(), &request, &bad); error != 0)
            throw Transport_error(verbs_error("posting a data receive for rank " + std::to_string(receive.peer), error));
        peer.busy[data][receiving] = true;
        peer.data_receive_bytes = static_cast<std::uint32_t>(receive.into.size());
        send_credit(receive.peer);
        if (fault_due(receive.peer, Injected_fault::Kind::qp_error)) move_to_error(receive.peer);
    }
    for (const Send& send : sends) {
        if (send.peer == rank_) {
            self_.send(send.data);  // the unit's own MFP: one local copy, as over TCP
            continue;
        }
        if (lost(send.peer)) continue;
        Peer& peer = peers_[send.peer];
        if (peer.busy[data][sending])
            throw std::logic_error("Verbs_transport: a second data send to rank " + std::to_string(send.peer));
        peer.data_send_bytes = static_cast<std::uint32_t>(send.data.size());
        if (fault_due(send.peer, Injected_fault::Kind::short_mfp)) {
            peer.data_send_bytes -= std::min<std::uint32_t>(peer.data_send_bytes, 8);
            log_warning("injected fault (--inject-fault): this MFP to rank ", send.peer, " goes ",
                        peer.data_send_bytes, " bytes long where its header announced ", send.data.size());
        }
        peer.held = Held_send{send.data.data(), peer.data_send_bytes, lkey_of(send.data)};
        peer.busy[data][sending] = true;
        send_held(send.peer);  // now if its receive is posted, else when the credit comes
        if (peer.held) {
            peer.held->since = std::chrono::steady_clock::now();
            if (traffic_) traffic_->sends_held.fetch_add(1, std::memory_order_relaxed);
        }
    }
}

bool Verbs_transport::fault_due(Rank peer, Injected_fault::Kind kind) {
    if (!settings_.fault || settings_.fault->kind != kind || settings_.fault->peer != peer) return false;
    return ++fault_operations_ == settings_.fault->after;
}

void Verbs_transport::move_to_error(Rank peer) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    if (const int error = ibv_modify_qp(peers_[peer].qps[data].get(), &attr, IBV_QP_STATE); error != 0)
        throw Transport_error(verbs_error("moving the data queue pair with rank " + std::to_string(peer) +
                                              " to the error state (--inject-fault)",
                                          error));
    log_warning("injected fault (--inject-fault): the data queue pair with rank ", peer,
                " is in the error state, its posted receive flushed");
}

bool Verbs_transport::wait_data(std::span<const Rank> sent_to, std::span<const Rank> received_from) {
    if (stop_.requested()) return false;
    const Moving_time moving(traffic_);
    return progress_until([&] {
        waited_.clear();  // the peers still pending, as in transfer()
        for (const Rank peer : sent_to)
            if (peer != rank_ && !lost(peer) && peers_[peer].busy[data][sending]) waited_.push_back(peer);
        for (const Rank peer : received_from)
            if (peer != rank_ && !lost(peer) && peers_[peer].busy[data][receiving]) waited_.push_back(peer);
        return waited_.empty();
    }, waited_);
}

void Verbs_transport::quiesce() {
    // Destroying a QP flushes what was posted on it: after ibv_destroy_qp
    // returns the device touches none of that memory.
    for (Peer& peer : peers_) drop_qps(peer);
    self_.cancel();
    quiesced_ = true;
}

void Verbs_transport::drop_qps(Peer& peer) {
    peer.qps[control].reset();
    peer.qps[data].reset();
    ++peer.generation;  // completions still queued for them are stale
    peer.arrived.clear();
    for (auto& channel : peer.busy) channel[sending] = channel[receiving] = false;
    peer.credits = peer.credits_unacked = 0;
    peer.held.reset();
}

void Verbs_transport::disconnect(Rank peer) {
    drop_qps(peers_[peer]);
    tcp_.disconnect(peer);
}

void Verbs_transport::lose(Rank peer, Link_failure failure, const std::string& detail) {
    tcp_.lose(peer, failure, detail);  // closes the connections, logs, and calls on_loss once
}

void Verbs_transport::forget_lost_peer(Rank peer, Link_failure failure, const std::string& detail) {
    drop_qps(peers_[peer]);
    if (on_loss_) on_loss_(peer, failure, detail);
}

template <typename Done>
bool Verbs_transport::progress_until(Done done, const std::vector<Rank>& waited) {
    const Busy_poll busy_poll{std::chrono::microseconds(settings_.busy_poll_us)};
    while (!done()) {
        if (stop_.requested()) return false;
        if (poll_completions() || busy_poll.poll([&] { return poll_completions(); })) continue;
        // Arm, then look once more: a completion between the last poll and
        // the arming would otherwise raise no event.
        if (const int error = ibv_req_notify_cq(cq_.get(), 0); error != 0)
            throw Transport_error(verbs_error("arming the completion queue", error));
        if (poll_completions()) continue;
        wait_for_events(waited);
    }
    return true;
}

bool Verbs_transport::poll_completions() {
    ibv_wc completions[completions_per_poll];
    const int found = ibv_poll_cq(cq_.get(), completions_per_poll, completions);
    if (found < 0) throw Transport_error("polling the completion queue failed");
    for (int i = 0; i < found; ++i) handle(completions[i]);
    return found > 0;
}

void Verbs_transport::handle(const ibv_wc& completion) {
    const Rank rank = static_cast<Rank>((completion.wr_id >> 2) & 0x3fffffff);
    if (rank >= units()) return;
    Peer& peer = peers_[rank];
    if ((completion.wr_id >> 40) != (peer.generation & 0xffffff)) return;  // of QPs since destroyed
    const auto channel = static_cast<Channel>((completion.wr_id >> 1) & 1);
    const auto direction = static_cast<Direction>(completion.wr_id & 1);
    if (completion.status != IBV_WC_SUCCESS) {
        lose(rank, link_failure_of(completion.status),
             std::string(direction == sending ? "sending" : "receiving") + " (" +
                 (channel == data ? "data" : "control") + "): " + ibv_wc_status_str(completion.status));
        return;
    }
    const auto slot = static_cast<std::uint32_t>((completion.wr_id >> 32) & 0xff);
    if (channel == control && direction == receiving) {
        if ((completion.wc_flags & IBV_WC_WITH_IMM) == 0) {
            peer.arrived.emplace_back(slot, completion.byte_len);
            return;
        }
        post_control_receive(rank, slot);  // a credit keeps no slot
        take_credit(rank, ntohl(completion.imm_data));
        return;
    }
    if (channel == control && slot == credit_slot) {
        --peer.credits_unacked;
        return;
    }
    peer.busy[channel][direction] = false;
    if (channel == data && traffic_)  // a send's byte_len is undefined: the size it was posted with
        (direction == sending ? traffic_->bytes_sent : traffic_->bytes_received)
            .fetch_add(direction == sending ? peer.data_send_bytes : completion.byte_len, std::memory_order_relaxed);
    if (channel == data && direction == receiving && completion.byte_len != peer.data_receive_bytes)
        lose(rank, Link_failure::error,
             "it sent an MFP of " + std::to_string(completion.byte_len) + " bytes where its header announced " +
                 std::to_string(peer.data_receive_bytes));
}

void Verbs_transport::wait_for_events(const std::vector<Rank>& waited) {
    // Only the connections of the peers waited for: a peer that closed once
    // it had delivered everything (the set stopping) is no loss until this
    // unit needs it again.
    watch_ = {{stop_.fd(), POLLIN, 0}, {channel_->fd, POLLIN, 0}, {context_->async_fd, POLLIN, 0}};
    for (const Rank peer : waited)
        if (peer != rank_ && !lost(peer) && tcp_.mesh().from[peer])
            watch_.push_back({tcp_.mesh().from[peer].get(), POLLIN, 0});
    // Woken at the heartbeat's pace too: a peer whose process went silent
    // (stopped, hung) closes nothing and completes nothing.
    const auto beat = std::chrono::ceil<std::chrono::milliseconds>(tcp_.heartbeat_interval()).count();
    const int woken = ::poll(watch_.data(), watch_.size(), static_cast<int>(beat));
    if (woken < 0 && errno != EINTR) throw Transport_error("poll: " + error_text(errno));
    tcp_.lose_silent(waited);
    if (woken <= 0) return;
    if (watch_[1].revents != 0) {
        ibv_cq* cq = nullptr;
        void* context = nullptr;
        if (ibv_get_cq_event(channel_.get(), &cq, &context) == 0) ibv_ack_cq_events(cq, 1);
    }
    if (watch_[2].revents != 0) handle_async_events();
    const bool closing = std::any_of(watch_.begin() + 3, watch_.end(), [](const pollfd& entry) { return entry.revents != 0; });
    // What a peer sent before it closed is delivered first: its completions
    // may be queued behind the close. The caller looks again before a loss.
    if (!closing || poll_completions()) return;
    for (const Rank peer : waited)
        if (peer != rank_ && !lost(peer) && tcp_.mesh().from[peer]) check_connection(peer);
}

void Verbs_transport::check_connection(Rank peer) {
    if (lost(peer) || !tcp_.mesh().from[peer]) return;
    std::byte byte{};
    const ssize_t got = ::recv(tcp_.mesh().from[peer].get(), &byte, 1, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (stop_.requested()) return;  // peers closing while everyone stops is no failure
    if (got == 0) lose(peer, Link_failure::closed, "it closed its connection (its process is gone)");
    else if (got < 0) lose(peer, errno == ECONNRESET ? Link_failure::reset : Link_failure::error, error_text(errno));
    else lose(peer, Link_failure::error, "it sent bytes on its set-up connection after the set-up");
}

void Verbs_transport::handle_async_events() {
    ibv_async_event event{};
    while (ibv_get_async_event(context_.get(), &event) == 0) {
        const ibv_event_type type = event.event_type;
        Rank affected = units();
        if (type == IBV_EVENT_QP_FATAL || type == IBV_EVENT_QP_REQ_ERR || type == IBV_EVENT_QP_ACCESS_ERR ||
            type == IBV_EVENT_PATH_MIG_ERR)
            for (Rank peer = 0; peer < units(); ++peer)
                for (const Qp& qp : peers_[peer].qps)
                    if (qp && qp.get() == event.element.qp) affected = peer;
        ibv_ack_async_event(&event);
        if (affected < units())
            lose(affected, Link_failure::error, std::string("queue pair event: ") + ibv_event_type_str(type));
        else if (type == IBV_EVENT_DEVICE_FATAL || type == IBV_EVENT_CQ_ERR)
            throw Transport_error(settings_.device + ": " + ibv_event_type_str(type));
        else if (type == IBV_EVENT_PORT_ERR)
            log_warning(settings_.device, " port ", int(settings_.port),
                        " went down: peers that stay silent are lost within the peer timeout");
    }
}

Transport_report Verbs_transport::report() const {
    Transport_report report;
    report.kind = "verbs";
    report.device = settings_.device;
    report.port = settings_.port;
    report.gid_index = gid_index_;
    ibv_port_attr port{};
    report.port_state = ibv_query_port(context_.get(), settings_.port, &port) == 0 ? port_state_name(port.state) : "UNKNOWN";
    report.link_layer = port_.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
    for (Rank rank = 0; rank < units(); ++rank) {
        const Peer& peer = peers_[rank];
        if (!peer.qps[data]) continue;
        ibv_qp_attr attr{};
        ibv_qp_init_attr init{};
        const bool known = ibv_query_qp(peer.qps[data].get(), &attr, IBV_QP_STATE, &init) == 0;
        report.peers.push_back({rank, known ? qp_state_name(attr.qp_state) : "UNKNOWN"});
    }
    return report;
}

}  // namespace eb
