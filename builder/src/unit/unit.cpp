#include "unit/unit.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <set>
#include <thread>

#include "engine/barrier.hpp"
#include "engine/event_builder.hpp"
#include "base/log.hpp"
#include "schedule/schedule.hpp"
#include "buffers/shm_ring.hpp"
#include "base/socket.hpp"
#include "telemetry/status_render.hpp"
#include "schedule/table_switch.hpp"
#include "transport/tcp/lost_peer_probe.hpp"

namespace eb {
namespace {

using namespace std::chrono_literals;

// Idle waits poll the process stop flag this often (a signal cannot notify a
// condition variable).
constexpr auto idle_poll = 200ms;
// A signalled unit waits this long for its set to stop together at a cycle
// boundary (peers gone, a source that waits) before it stops alone.
constexpr auto forced_stop_after = 500ms;

std::vector<bool> live_ranks(const Rank_table& table) {
    std::vector<bool> live(table.units());
    for (Rank rank = 0; rank < table.units(); ++rank) live[rank] = table.live(rank);
    return live;
}

Command_outcome refused(std::string error) { return {Command_outcome::Kind::refused, std::move(error)}; }

Rank_table request_table(const Configure_request& request) {
    return Rank_table(request.functions, request.unread_sources, request.streams);
}

// Each live peer of `rank` in `table`, lost or up as the transport holds it.
void show_peers(Unit_status& status, const Rank_table& table, Rank rank, const Mesh_transport& transport) {
    for (Rank peer = 0; peer < table.units(); ++peer)
        if (peer != rank && table.live(peer))
            status.set_peer(peer, transport.lost(peer) ? Link_state::lost : Link_state::up);
    status.set_transport(transport.report());
}

// Tells the operator, while the unit builds under a table, when the peers
// it lost answer again (lost_peers_reachable; null when no probe runs): it
// rejoins a unit in its session only then.
class Probe_lost_peers {
public:
    Probe_lost_peers(Unit_status& status, std::vector<Peer_address> peers, Rank rank, int peer_timeout_ms)
        : status_(status),
          probe_(std::move(peers), rank, peer_timeout_ms, [&status](Rank peer) { return status.peer_is_lost(peer); },
                 [&status](Rank peer, bool answers) { status.set_lost_peer_reached(peer, answers); }) {
        status_.set_probing(true);
    }
    ~Probe_lost_peers() { status_.set_probing(false); }
    Probe_lost_peers(const Probe_lost_peers&) = delete;
    Probe_lost_peers& operator=(const Probe_lost_peers&) = delete;

private:
    Unit_status& status_;
    Lost_peer_probe probe_;
};

}  // namespace

Unit::Unit(const Config& config, Unit_status& status, const Stop_flag& process_stop)
    : config_(config),
      status_(status),
      process_stop_(process_stop),
      data_threads_(std::max(config.data_threads, 1u), Busy_poll(std::chrono::microseconds(config.busy_poll_us))),
      signal_relay_([this](std::stop_token token) { relay_signal(token); }) {}

void Unit::relay_signal(std::stop_token token) {
    while (!process_stop_.wait_for(idle_poll))
        if (token.stop_requested()) return;
    // Controlled, a signal is the pod going (deleted, evicted, drained): the
    // unit leaves alone and the operator decides what its set does (a spare,
    // a rejoin). Self-configured, nobody else decides: the set stops together.
    if (config_.self_configured()) {
        log_info("signalled to stop: stopping with the set at the end of this cycle");
        command(Command::stop, nullptr);  // refused where nothing runs: the process just exits
        std::unique_lock lock(mutex_);
        changed_.notify_all();
        if (!changed_.wait_for(lock, forced_stop_after, [this] { return !in_session_; }))
            log_warning("the set did not stop within ", forced_stop_after.count(), " ms of the signal; stopping alone");
    } else {
        log_info("signalled to stop: leaving the set (its peers see this unit lost)");
    }
    // Ends the session if it still runs, and any wait on the buffers.
    session_stop_.request();
}

std::optional<Rank> Unit::fixed_rank() const {
    return config_.rank_given ? std::optional<Rank>(config_.rank) : std::nullopt;
}

std::string Unit::status_json() const { return eb::status_json(status_.snapshot()); }

std::string Unit::metrics_text() const { return prometheus_metrics(status_.snapshot()); }

void Unit::configure_from_flags() {
    Configure_request request{config_.rank, 1, config_.peers,
                              flag_functions(config_.units(), config_.layout, config_.dummies), config_.run_name};
    const Command_outcome configured = command(Command::configure, &request);
    if (configured.kind != Command_outcome::Kind::done) throw std::runtime_error(configured.error);
    // Open the source and output now: a bad --source-file, a ring held by a
    // live writer or a full /dev/shm fails the start (exit 1), not the run.
    buffers_.emplace(config_, config_.rank, status_, session_stop_, data_threads_);
    buffers_->fit(request_table(request));
    command(Command::start, nullptr);
}

Command_outcome Unit::command(Command command, const Configure_request* request) {
    std::lock_guard lock(mutex_);
    const Transition transition = eb::transition(status_.state(), command);
    if (!transition.allowed) return refused(transition.refusal);
    switch (command) {
        case Command::configure: {
            Command_outcome outcome = configure(*request);
            if (outcome.kind != Command_outcome::Kind::done) return outcome;
            break;
        }
        case Command::start:
            stop_vote_ = false;
            kept_start_ = in_session_;
            break;
        case Command::pause:
            pause_vote_ = true;
            kept_resume_ = false;
            break;
        // In a session the pause still reaches the set; the unit goes on where
        // the set pauses. Idle or standby, there is nothing to pause yet.
        case Command::resume:
            if (in_session_ && phase_ != Session_phase::paused) kept_resume_ = true;
            else pause_vote_ = false;
            break;
        case Command::stop:
            // In a set, building or switching tables: the set stops together
            // at the end of a cycle. Paused (the set is at a common boundary),
            // connecting or standby: at once.
            stop_vote_ = true;
            kept_start_ = false;
            if (in_session_ && (!in_set_ || phase_ == Session_phase::paused)) session_stop_.request();
            break;
        case Command::reset:
            current_.reset();
            pending_.clear();
            joiners_.reset();
            status_.set_pending_epoch(0);
            if (in_session_) session_stop_.request();
            status_.reset();
            break;
    }
    if (command != Command::reset) status_.set_state(transition.next);
    log_info(command_name(command), ": now ", control_state_name(status_.state()));
    changed_.notify_all();
    return {};
}

Command_outcome Unit::configure(const Configure_request& request) {
    const Configure_request* newest = newest_table();
    if (newest != nullptr) {
        if (request.epoch < newest->epoch)
            return refused("epoch " + std::to_string(request.epoch) + " is older than epoch " +
                           std::to_string(newest->epoch) + ", which this unit holds; epochs only go forward");
        // The same table again; its resume hint may have moved on since.
        Configure_request same = request;
        same.resume_event = newest->resume_event;
        if (request.epoch == newest->epoch)
            return same == *newest ? Command_outcome{}
                                      : refused("epoch " + std::to_string(request.epoch) +
                                                " was configured with another table; publish the change as a new epoch");
    }
    if (request.rank >= request.peers.size())
        return {Command_outcome::Kind::invalid, "rank " + std::to_string(request.rank) + " is not in the table"};
    // A session that is ending (reset, signalled) runs no table any more:
    // this one is for the next session. A unit of a running set switching
    // tables (connecting the last one's joiners) is in the set all along.
    const bool in_session = in_set_ && !session_stop_.requested();
    if (in_session && request.peers.size() != current_->peers.size())
        return refused("the table has " + std::to_string(request.peers.size()) + " ranks, the running one " +
                       std::to_string(current_->peers.size()) + "; the number of ranks cannot change while running: "
                       "stop the set first");
    const std::uint16_t port = request.peers[request.rank].port;
    if (!listener_ || port != listener_port_) {
        if (in_session) return refused("this rank's data port cannot change while running; stop the set first");
        try {
            listener_ = std::make_shared<const Fd>(Peer_links::listen(port));
            listener_port_ = port;
        } catch (const std::exception& error) {
            return {Command_outcome::Kind::invalid, "cannot listen on data port " + std::to_string(port) +
                                                        " (table.ranks[" + std::to_string(request.rank) +
                                                        "].address): " + error.what()};
        }
    }
    if (in_session) {
        // The running set switches when every unit holds the table.
        pending_.emplace(request.epoch, request);
        status_.set_pending_epoch(static_cast<std::uint32_t>(request.epoch));
        watch_joiners(request);
    } else {
        adopt(request);
        // A session still connecting (a table the set may never take it
        // back under) starts over on the new one.
        if (in_session_) {
            log_info("connecting again, under rank table epoch ", request.epoch);
            session_stop_.request();
        }
    }
    return {};
}

const Configure_request* Unit::newest_table() const {
    if (!pending_.empty()) return &pending_.rbegin()->second;
    return current_ ? &*current_ : nullptr;
}

void Unit::watch_joiners(const Configure_request& request) {
    const Rank_table next = request_table(request), now = request_table(*current_);
    std::set<Rank> joiners;
    std::string named;
    for (Rank peer = 0; peer < next.units(); ++peer) {
        if (peer == request.rank ||
            peer_change(now.live(peer), status_.peer_is_lost(peer), next.live(peer)) != Peer_change::join)
            continue;
        joiners.insert(peer);
        named += (named.empty() ? "" : ", ") + std::to_string(peer);
    }
    joiners_.reset();
    if (joiners.empty()) return;
    log_info("rank table epoch ", request.epoch, " takes ranks ", named, " into the running set: voting for it once ",
             "their data ports answer, ", config_.join_timeout_ms, " ms at most (--join-timeout-ms)");
    joiners_ = std::make_unique<Joiner_watch>(request.epoch, request.peers, joiners, request.rank,
                                              static_cast<int>(config_.peer_timeout_ms), join_timeout());
}

void Unit::adopt(const Configure_request& request) {
    current_ = request;
    pending_.clear();
    joiners_.reset();
    status_.set_pending_epoch(0);
    status_.set_table(static_cast<std::uint32_t>(request.epoch), live_ranks(request_table(request)));
    set_log_rank(request.rank);
}

bool Unit::run() {
    while (true) {
        const std::optional<Configure_request> table = wait_for_work();
        if (!table) {
            if (buffers_) buffers_->stop_output();  // a consumer tells a stop from a complete run
            return false;
        }
        {
            std::lock_guard lock(mutex_);
            session_stop_.clear();
            in_session_ = true;
            // A unit paused before its session (standby, connecting) pauses the set.
            pause_vote_ = status_.state() == Control_state::paused;
            kept_resume_ = false;
            kept_start_ = false;
            if (process_stop_.requested()) session_stop_.request();
        }
        Session_end end = Session_end::stopped;
        try {
            end = run_session(*table);
        } catch (const Stopped&) {
            // Asked to stop while waiting on a shared-memory ring.
        } catch (const std::exception& error) {
            hold_error(error.what());
        }
        {
            std::lock_guard lock(mutex_);
            in_session_ = false;
            in_set_ = false;
            show_phase(Session_phase::none);
            changed_.notify_all();  // a signalled unit waits for this
        }
        if (end == Session_end::completed && config_.self_configured()) return true;
    }
}

std::optional<Configure_request> Unit::wait_for_work() {
    std::unique_lock lock(mutex_);
    while (!process_stop_.requested()) {
        const bool running = status_.state() == Control_state::running;
        const bool live = current_ && request_table(*current_).live(current_->rank);
        status_.set_activity(running && current_ ? (live ? "connecting" : "standby") : "idle");
        if (running && live) return current_;
        changed_.wait_for(lock, idle_poll);
    }
    return std::nullopt;
}

void Unit::hold_error(const std::string& error) {
    if (buffers_) buffers_->fail_output();  // the consumer must not take this for a complete run
    status_.fail(error);
    log_error(error, "; holding ERROR until reset");
    std::unique_lock lock(mutex_);
    show_phase(Session_phase::none);
    while (status_.state() == Control_state::error && !process_stop_.requested()) changed_.wait_for(lock, idle_poll);
}

void Unit::set_phase(Session_phase phase) {
    std::lock_guard lock(mutex_);
    show_phase(phase);
}

void Unit::show_phase(Session_phase phase) {
    phase_ = phase;
    status_.set_activity(phase == Session_phase::none         ? "idle"
                         : phase == Session_phase::connecting ? "connecting"
                         : phase == Session_phase::paused     ? "paused"
                                                              : "building");
}

std::shared_ptr<const Fd> Unit::session_listener() const {
    std::lock_guard lock(mutex_);
    return listener_;
}

Vote Unit::vote() {
    std::lock_guard lock(mutex_);
    // A reset while building leaves no table until the session has ended: no switch to vote for.
    const Configure_request* newest = newest_table();
    std::uint32_t epoch = newest != nullptr ? static_cast<std::uint32_t>(newest->epoch) : 0u;
    // Not before the newest table's joiners answer: the switch would stall
    // the set on them (Joiner_watch). Its own table holds the set back.
    if (joiners_ && joiners_->epoch() == epoch && current_ && !joiners_->ready())
        epoch = static_cast<std::uint32_t>(current_->epoch);
    return {epoch, pause_vote_, stop_vote_};
}

Unit::Session_end Unit::run_session(Configure_request table) {
    const Rank rank = table.rank;
    Rank_table ranks = request_table(table);
    set_phase(Session_phase::connecting);
    if (!buffers_) buffers_.emplace(config_, rank, status_, session_stop_, data_threads_);
    buffers_->fit(ranks);  // before connecting: a source ring may take a while

    // A unit that never built (a spare) has no place in the event stream
    // of its own: in a set started afresh it goes on past where the
    // operator last saw the run (its hello carries that to the others); a
    // set being joined overrides it. A unit that built keeps its place.
    if (cycles_done_ == 0)
        next_chunk_ = std::max(next_chunk_, (table.resume_event + config_.packing_factor - 1) / config_.packing_factor);
    Peer_links links(rank, {config_.transport_settings(), join_timeout(), config_.data_key, &status_.refusals()}, session_stop_,
                     [this](Rank peer, Link_failure failure, const std::string&) { status_.peer_lost(peer, failure); },
                     data_threads_);
    const auto reached = links.connect(*session_listener(), table.peers, live_ranks(ranks), mesh_position(table.epoch, false));
    if (!reached) return Session_end::stopped;
    // Join the set where it is: units already building say so in their hello;
    // units starting together go on from the furthest of them.
    bool joining = false;
    for (const auto& hello : reached->hellos) {
        if (!hello) continue;
        if (hello->in_session && !joining) {
            joining = true;
            next_chunk_ = hello->next_chunk;
            cycles_done_ = hello->cycles_done;
        } else if (!joining) {
            next_chunk_ = std::max(next_chunk_, hello->next_chunk);
            cycles_done_ = std::max(cycles_done_, hello->cycles_done);
        }
    }
    status_.set_next_event(next_chunk_ * config_.packing_factor);
    // The running units this process reached each send it a verdict.
    Mesh_transport& transport = links.transport();
    transport.count_traffic(status_.traffic());
    if (joining && !take_verdicts(ranks, rank, reached->connected, reached->in_session, transport))
        return Session_end::left;
    {
        std::lock_guard lock(mutex_);
        in_set_ = true;
    }
    show_peers(status_, ranks, rank, transport);

    const std::uint64_t target_cycles = cycles_for_events(config_.events, config_.packing_factor);
    while (true) {  // one table (epoch) per turn
        const Probe_lost_peers probe(status_, table.peers, rank, static_cast<int>(config_.peer_timeout_ms));
        std::optional<Barrier> barrier;
        if (config_.barrier != Barrier_kind::none) barrier.emplace(config_.barrier, transport, ranks.live_ranks());
        if (ranks.runs_ru(rank)) buffers_->start_source_at(next_chunk_);
        buffers_->expect(ranks, static_cast<std::uint32_t>(table.epoch), next_chunk_);
        Event_builder builder({config_.packing_factor, config_.barrier_every, static_cast<std::uint32_t>(table.epoch),
                               config_.incomplete == Incomplete_policy::drop, config_.receives_ahead(),
                               config_.receive_window},
                              ranks, transport,
                              {ranks.runs_ru(rank) ? buffers_->source() : nullptr,
                               ranks.runs_bu(rank) ? buffers_->output() : nullptr, barrier ? &*barrier : nullptr,
                               &status_.parse_errors(), &status_.events_dropped(), &status_.events_in_doubt(), &status_.phase_time(),
                               &status_.barrier_wait()});
        set_phase(Session_phase::building);
        log_info("building under rank table epoch ", table.epoch, " from chunk ", next_chunk_);
        std::optional<Configure_request> next;
        while (!next) {
            if (target_cycles != 0 && cycles_done_ >= target_cycles) {
                log_info("built the requested ", config_.events, " events");
                status_.set_activity("idle");  // waiting for a consumer to drain the ring is not building
                if (config_.self_configured()) buffers_->finish_output();
                status_.set_state(Control_state::ready);
                return Session_end::completed;
            }
            const std::optional<Cycle_decision> decision =
                builder.run_cycle(next_chunk_, vote(), target_cycles != 0 && cycles_done_ + 1 >= target_cycles);
            if (!decision) return Session_end::stopped;
            next_chunk_ += builder.chunks_per_cycle();
            ++cycles_done_;
            status_.set_next_event(next_chunk_ * config_.packing_factor);
            status_.set_ring_fill(buffers_->mfp_ring_fill(), buffers_->mep_ring_fill());
            // Reset (or signalled) in this cycle: the state and tables are no
            // longer the set's to move.
            if (session_stop_.requested()) return Session_end::stopped;
            if (decision->switch_to != 0) {
                std::lock_guard lock(mutex_);
                const auto found = pending_.find(decision->switch_to);
                if (found == pending_.end())
                    throw std::runtime_error("the set switched to rank table epoch " +
                                             std::to_string(decision->switch_to) +
                                             ", which this unit was never given; configure every unit with every epoch");
                next = found->second;
                pending_.erase(pending_.begin(), std::next(found));
                if (joiners_ && joiners_->epoch() <= decision->switch_to) joiners_.reset();
                status_.set_pending_epoch(pending_.empty() ? 0 : static_cast<std::uint32_t>(pending_.rbegin()->first));
            }
            if (decision->stop) {
                std::lock_guard lock(mutex_);
                stop_vote_ = false;
                if (next) current_ = *next;
                if (kept_start_) {
                    log_info("the set stopped at chunk ", next_chunk_, "; started again since: connecting for the next session");
                } else {
                    status_.set_state(Control_state::ready);
                    log_info("the set stopped at chunk ", next_chunk_);
                }
                return Session_end::stopped;
            }
            if (decision->pause && !wait_while_paused()) return Session_end::stopped;
        }
        if (!switch_table(table, *next, links)) return Session_end::left;
        ranks = request_table(table);
    }
}

bool Unit::wait_while_paused() {
    std::unique_lock lock(mutex_);
    // This boundary serves every pause the unit was given so far. The state
    // says what came after: a resume, and it goes on; a stop, and it stops
    // here, the set being at a common boundary.
    pause_vote_ = false;
    if (kept_resume_) {
        kept_resume_ = false;
        log_info("resumed before the set paused: going on at chunk ", next_chunk_);
        return true;
    }
    if (stop_vote_) return false;
    status_.set_state(Control_state::paused);
    show_phase(Session_phase::paused);
    log_info("paused at chunk ", next_chunk_);
    while (status_.state() == Control_state::paused && !session_stop_.requested())
        changed_.wait_for(lock, idle_poll);
    if (session_stop_.requested() || status_.state() != Control_state::running) return false;
    show_phase(Session_phase::building);
    return true;
}

bool Unit::switch_table(Configure_request& table, const Configure_request& next, Peer_links& links) {
    Mesh_transport& transport = links.transport();
    const Rank_table before = request_table(table);
    const Rank_table after = request_table(next);
    {
        std::lock_guard lock(mutex_);
        current_ = next;
        // Made a dummy, it leaves the set here: a table configured from now
        // on is adopted, not held for a switch this unit takes no part in.
        in_set_ = after.live(next.rank);
        status_.set_table(static_cast<std::uint32_t>(next.epoch), live_ranks(after));
    }
    table = next;
    log_info("switched to rank table epoch ", next.epoch, " at chunk ", next_chunk_);
    if (!after.live(table.rank)) return false;  // now a dummy: standby; the transport closes on return
    buffers_->fit(after);  // the rank's function may have moved
    const Rank units = after.units();
    std::vector<bool> joining(units), going_on(units), fresh(units);
    bool any_joining = false;
    for (Rank peer = 0; peer < units; ++peer) {
        if (peer == table.rank) continue;
        const Peer_change change = peer_change(before.live(peer), transport.lost(peer), after.live(peer));
        // A lost peer that joins again has only dead connections: drop them.
        if (change != Peer_change::keep) transport.disconnect(peer);
        joining[peer] = change == Peer_change::join;
        going_on[peer] = change == Peer_change::keep && after.live(peer) && !transport.lost(peer);
        any_joining = any_joining || joining[peer];
    }
    if (any_joining) {
        set_phase(Session_phase::connecting);
        const auto reached = links.connect(*session_listener(), table.peers, joining, mesh_position(next.epoch, true));
        if (!reached) throw Stopped();
        std::vector<bool> connected(units), out_of_step(units);
        for (Rank peer = 0; peer < units; ++peer) {
            const std::optional<Mesh_position>& hello = reached->hellos[peer];
            // A unit that went on building on its own (cut off from this set
            // while it ran) is elsewhere in the event stream: it is refused
            // as one not connected, never built with.
            out_of_step[peer] = reached->in_session[peer] &&
                                (hello->next_chunk != next_chunk_ || hello->cycles_done != cycles_done_);
            connected[peer] = reached->connected[peer] && !out_of_step[peer];
            // A new process waits for this unit's verdict; a running unit (it
            // had lost this one) does not.
            fresh[peer] = reached->connected[peer] && !reached->in_session[peer];
        }
        for (Rank peer = 0; peer < units; ++peer) {
            if (out_of_step[peer])
                transport.lose(peer, Link_failure::out_of_step,
                               "it joins from a session of its own, at chunk " +
                                   std::to_string(reached->hellos[peer]->next_chunk) + " after " +
                                   std::to_string(reached->hellos[peer]->cycles_done) + " cycles, this unit at " +
                                   std::to_string(next_chunk_) + " after " + std::to_string(cycles_done_));
            else if (joining[peer] && reached->later_epochs[peer] != 0)
                transport.lose(peer, Link_failure::later_epoch,
                               "it is on rank table epoch " + std::to_string(reached->later_epochs[peer]) +
                                   " already: the set takes it in when it switches to that table");
            else if (joining[peer] && !connected[peer])
                transport.lose(peer, Link_failure::join_timeout,
                               "not connected within the join timeout (--join-timeout-ms)");
        }
    }
    agree_on_joiners(table.rank, after, joining, going_on, fresh, transport);
    show_peers(status_, after, table.rank, transport);
    return true;
}

std::chrono::milliseconds Unit::join_timeout() const { return std::chrono::milliseconds(config_.join_timeout_ms); }

Mesh_position Unit::mesh_position(std::uint64_t epoch, bool in_session) const {
    return {static_cast<std::uint32_t>(epoch), in_session, next_chunk_, cycles_done_};
}

bool Unit::take_verdicts(const Rank_table& ranks, Rank rank, std::vector<bool> connected,
                         const std::vector<bool>& running, Transport& transport) {
    const Rank units = ranks.units();
    std::vector<Membership> verdicts(units, Membership(units));
    std::vector<Receive> receives;
    for (Rank peer = 0; peer < units; ++peer)
        if (running[peer]) receives.push_back({peer, std::as_writable_bytes(std::span(verdicts[peer]))});
    if (!transport.transfer({}, receives)) throw Stopped();
    std::vector<Membership> received;
    for (Rank peer = 0; peer < units; ++peer) {
        connected[peer] = connected[peer] && !transport.lost(peer);
        if (running[peer] && connected[peer]) received.push_back(std::move(verdicts[peer]));
    }
    const Join_outcome outcome = judge_join(rank, connected, received);
    if (!outcome.joined) {
        // Its peers give up on it (its connections close with the transport):
        // it is lost for the whole set, and a newer table brings it in.
        log_warning("could not join the running set: not every running unit connected this one, or this one not "
                    "every unit they keep, within the join timeout; waiting for a newer rank table");
        return false;
    }
    for (const Rank peer : ranks.live_ranks())
        if (!outcome.keep[peer] && !transport.lost(peer))
            transport.lose(peer, Link_failure::join_timeout, "the running set did not take it in");
    log_info("joined the running set at chunk ", next_chunk_);
    return true;
}

void Unit::agree_on_joiners(Rank rank, const Rank_table& after, const std::vector<bool>& joining,
                            const std::vector<bool>& going_on, const std::vector<bool>& fresh,
                            Transport& transport) {
    const Rank units = after.units();
    // Joiners not connected are lost already.
    Membership report(units);
    for (Rank peer = 0; peer < units; ++peer) report[peer] = peer == rank || (after.live(peer) && !transport.lost(peer));
    std::vector<Membership> reports(units, Membership(units));
    std::vector<Send> sends;
    std::vector<Receive> receives;
    for (Rank peer = 0; peer < units; ++peer) {
        if (!going_on[peer]) continue;
        sends.push_back({peer, std::as_bytes(std::span(report))});
        receives.push_back({peer, std::as_writable_bytes(std::span(reports[peer]))});
    }
    if (!transport.transfer(sends, receives)) throw Stopped();

    std::vector<Membership> heard;
    std::vector<bool> joined(units);
    for (Rank peer = 0; peer < units; ++peer) {
        if (going_on[peer] && !transport.lost(peer)) heard.push_back(std::move(reports[peer]));
        joined[peer] = joining[peer] && !transport.lost(peer);
    }
    const std::vector<bool> kept = kept_joiners(joined, heard);
    Membership verdict = report;
    for (Rank peer = 0; peer < units; ++peer)
        if (joined[peer] && !kept[peer]) verdict[peer] = 0;
    sends.clear();
    for (Rank peer = 0; peer < units; ++peer)
        if (fresh[peer] && joined[peer]) sends.push_back({peer, std::as_bytes(std::span(verdict))});
    if (!transport.transfer(sends, {})) throw Stopped();
    for (Rank peer = 0; peer < units; ++peer)
        if (joined[peer] && !kept[peer])
            transport.lose(peer, Link_failure::join_timeout,
                           "not every unit of the set connected it within the join timeout (--join-timeout-ms)");
}

}  // namespace eb
