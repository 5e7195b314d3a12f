#include "telemetry/unit_status.hpp"

#include <utility>

namespace eb {

std::string_view link_state_name(Link_state state) {
    switch (state) {
        case Link_state::self: return "self";
        case Link_state::up: return "up";
        case Link_state::connecting: return "connecting";
        case Link_state::lost: return "lost";
        case Link_state::dummy: return "dummy";
    }
    return "unknown";
}

// Phases take microseconds (small MFPs) to tens of milliseconds (large ones
// on a loaded host); barriers the same range.
Unit_status::Unit_status(Rank rank)
    : rank_(rank), phase_time_(exponential_bounds(1e-6, 4, 12)), barrier_wait_(exponential_bounds(1e-6, 4, 12)) {}

void Unit_status::set_state(Control_state state) {
    Control_state current = state_.load();
    while (current != Control_state::error && !state_.compare_exchange_weak(current, state)) {
    }
}

void Unit_status::fail(std::string error) {
    note_problem(std::move(error));
    state_.store(Control_state::error);
}

void Unit_status::reset() { state_.store(Control_state::not_ready); }

void Unit_status::set_activity(std::string_view activity) {
    constexpr std::string_view building = "building";
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex_);
    if (activity_ == building && activity != building) built_for_ += now - building_since_;
    if (activity_ != building && activity == building) building_since_ = now;
    activity_ = activity;
}

void Unit_status::note_problem(std::string problem) {
    std::lock_guard lock(mutex_);
    last_error_ = std::move(problem);
}

void Unit_status::set_table(std::uint32_t epoch, const std::vector<bool>& live) {
    // The stall is timed afresh under a new table: the rank may run another function now.
    discard_streak_.store(0, std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    epoch_ = epoch;
    live_ = rank_ < live.size() && live[rank_];
    peers_.assign(live.size(), Link_state::dummy);
    lost_reached_.assign(live.size(), false);
    for (Rank peer = 0; peer < live.size(); ++peer)
        if (live[peer]) peers_[peer] = peer == rank_ ? Link_state::self : Link_state::connecting;
}

void Unit_status::set_peer(Rank peer, Link_state state) {
    std::lock_guard lock(mutex_);
    if (peer >= peers_.size()) return;
    peers_[peer] = state;
    lost_reached_[peer] = false;
}

void Unit_status::peer_lost(Rank peer, Link_failure failure) {
    std::lock_guard lock(mutex_);
    if (peer < peers_.size()) {
        peers_[peer] = Link_state::lost;
        lost_reached_[peer] = false;
    }
    ++peers_lost_;
    ++link_failures_[static_cast<std::size_t>(failure)];
}

bool Unit_status::peer_is_lost(Rank peer) const {
    std::lock_guard lock(mutex_);
    return peer < peers_.size() && peers_[peer] == Link_state::lost;
}

void Unit_status::set_lost_peer_reached(Rank peer, bool reached) {
    std::lock_guard lock(mutex_);
    if (peer < peers_.size() && peers_[peer] == Link_state::lost) lost_reached_[peer] = reached;
}

void Unit_status::set_probing(bool probing) {
    std::lock_guard lock(mutex_);
    probing_ = probing;
}

void Unit_status::add_mep(std::uint64_t events_complete, std::uint64_t events_incomplete, std::uint64_t bytes) {
    discard_streak_.store(0, std::memory_order_relaxed);
    events_built_.fetch_add(events_complete, std::memory_order_relaxed);
    events_incomplete_.fetch_add(events_incomplete, std::memory_order_relaxed);
    meps_built_.fetch_add(1, std::memory_order_relaxed);
    bytes_built_.fetch_add(bytes, std::memory_order_relaxed);
}

void Unit_status::add_discarded_mep(std::uint64_t events) {
    events_dropped_.fetch_add(events, std::memory_order_relaxed);
    meps_discarded_.fetch_add(1, std::memory_order_relaxed);
    // The streak's start is written before the streak counts, so a snapshot
    // that sees it counting (under the lock) never reads an older start.
    if (discard_streak_.load(std::memory_order_relaxed) == 0) {
        std::lock_guard lock(mutex_);
        streak_began_ = built_for_locked();
    }
    discard_streak_.fetch_add(1, std::memory_order_relaxed);
}

std::chrono::steady_clock::duration Unit_status::built_for_locked() const {
    auto built_for = built_for_;
    if (activity_ == "building") built_for += std::chrono::steady_clock::now() - building_since_;
    return built_for;
}

void Unit_status::set_rates(double events_per_second, double bytes_per_second) {
    std::lock_guard lock(mutex_);
    events_per_second_ = events_per_second;
    bytes_per_second_ = bytes_per_second;
}

void Unit_status::watch_consumer(const std::string& ring) {
    std::lock_guard lock(mutex_);
    consumer_ = std::make_unique<Consumer_report_reader>(ring);
}

void Unit_status::set_ring_fill(double mfp, double mep) {
    std::lock_guard lock(mutex_);
    mfp_ring_fill_ = mfp;
    mep_ring_fill_ = mep;
}

void Unit_status::set_numa(std::string json, Numa_locality locality) {
    std::lock_guard lock(mutex_);
    numa_json_ = std::move(json);
    numa_ = locality;
}

void Unit_status::set_transport(Transport_report report) {
    std::lock_guard lock(mutex_);
    transport_ = std::move(report);
}

Status_snapshot Unit_status::snapshot() const {
    Status_snapshot snapshot;
    snapshot.rank = rank_;
    snapshot.state = state_.load();
    snapshot.pending_epoch = pending_epoch_.load();
    snapshot.next_event = next_event_.load(std::memory_order_relaxed);
    snapshot.events_built = events_built_.load(std::memory_order_relaxed);
    snapshot.events_incomplete = events_incomplete_.load(std::memory_order_relaxed);
    snapshot.events_dropped = events_dropped_.load(std::memory_order_relaxed);
    snapshot.events_in_doubt = events_in_doubt_.load(std::memory_order_relaxed);
    snapshot.meps_built = meps_built_.load(std::memory_order_relaxed);
    snapshot.meps_discarded = meps_discarded_.load(std::memory_order_relaxed);
    snapshot.bytes_built = bytes_built_.load(std::memory_order_relaxed);
    snapshot.network_bytes_sent = traffic_.bytes_sent.load(std::memory_order_relaxed);
    snapshot.network_bytes_received = traffic_.bytes_received.load(std::memory_order_relaxed);
    snapshot.network_seconds = static_cast<double>(traffic_.moving_ns.load(std::memory_order_relaxed)) / 1e9;
    snapshot.network_sends_held = traffic_.sends_held.load(std::memory_order_relaxed);
    snapshot.network_send_held_seconds = static_cast<double>(traffic_.held_ns.load(std::memory_order_relaxed)) / 1e9;
    for (std::size_t kind = 0; kind < parse_error_kinds; ++kind)
        snapshot.parse_errors[kind] = parse_errors_.get(static_cast<Parse_error>(kind));
    snapshot.phase_time = phase_time_.snapshot();
    snapshot.barrier_wait = barrier_wait_.snapshot();
    std::lock_guard lock(mutex_);
    snapshot.units = static_cast<Rank>(peers_.size());
    snapshot.activity = activity_;
    const auto built_for = built_for_locked();
    snapshot.building_seconds = std::chrono::duration<double>(built_for).count();
    if (discard_streak_.load(std::memory_order_relaxed) != 0)
        snapshot.output_stalled_seconds = std::chrono::duration<double>(built_for - streak_began_).count();
    snapshot.live = live_;
    snapshot.epoch = epoch_;
    snapshot.peers = peers_;
    snapshot.lost_reached = lost_reached_;
    snapshot.probing = probing_;
    snapshot.peers_lost = peers_lost_;
    snapshot.link_failures = link_failures_;
    for (std::size_t kind = 0; kind < refusal_kinds; ++kind)
        snapshot.refusals[kind] = refusals_.get(static_cast<Refusal>(kind));
    snapshot.last_error = last_error_;
    snapshot.events_per_second = events_per_second_;
    snapshot.bytes_per_second = bytes_per_second_;
    snapshot.mfp_ring_fill = mfp_ring_fill_;
    snapshot.mep_ring_fill = mep_ring_fill_;
    if (consumer_) snapshot.consumer = consumer_->read();
    snapshot.numa_json = numa_json_;
    snapshot.numa = numa_;
    snapshot.transport = transport_;
    return snapshot;
}

}  // namespace eb
