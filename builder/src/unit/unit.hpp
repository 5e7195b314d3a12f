#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "unit/config.hpp"
#include "control/configure_request.hpp"
#include "control/control_api.hpp"
#include "schedule/cycle_vote.hpp"
#include "base/data_threads.hpp"
#include "base/fd.hpp"
#include "schedule/rank_table.hpp"
#include "base/stop_flag.hpp"
#include "schedule/table_switch.hpp"
#include "transport/peer_links.hpp"
#include "transport/tcp/joiner_watch.hpp"
#include "transport/transport.hpp"
#include "unit/unit_buffers.hpp"
#include "telemetry/unit_status.hpp"

namespace eb {

// One eb-builder process: the control state machine (commands arrive on the
// HTTP thread) and the data path (run() on the main thread). The data path
// runs sessions: a session connects the live units of a table and builds
// cycles until the set stops, this unit leaves it, or it is reset; within a
// session the set switches tables at a cycle boundary the votes agree on.
class Unit final : public Control_target {
public:
    Unit(const Config& config, Unit_status& status, const Stop_flag& process_stop);

    // Control_target
    Command_outcome command(Command command, const Configure_request* configure) override;
    std::string status_json() const override;
    std::string metrics_text() const override;
    Control_state state() const override { return status_.state(); }
    std::optional<Rank> fixed_rank() const override;

    // Self-configured (--peers): configure from the flags at epoch 1 and start.
    void configure_from_flags();

    // The data path, until the process is stopped or, self-configured, the
    // --events are built. Returns true if they were.
    bool run();

private:
    enum class Session_end { stopped, completed, left };
    enum class Session_phase { none, connecting, building, paused };

    // On SIGTERM/SIGINT: stop as POST /control/stop does, alone if the set
    // cannot get to a boundary in time.
    void relay_signal(std::stop_token token);
    Command_outcome configure(const Configure_request& request);
    void adopt(const Configure_request& request);  // as the table in force; mutex held
    const Configure_request* newest_table() const;  // pending or in force, if any; mutex held
    std::optional<Configure_request> wait_for_work();
    Session_end run_session(Configure_request table);
    bool switch_table(Configure_request& table, const Configure_request& next, Peer_links& links);
    // A join never wedges the set (docs/control-api.md, "Joiners"): at a
    // switch the units that go on from the old table tell each other whom
    // they connected, keep only joiners every one of them connected, send
    // each new process their verdict and give up on the other joiners.
    void agree_on_joiners(Rank rank, const Rank_table& after, const std::vector<bool>& joining,
                          const std::vector<bool>& going_on, const std::vector<bool>& fresh, Transport& transport);
    // A process joining a running set: waits for the verdicts of the running
    // units it connected (`running`), builds with the ranks they all keep and
    // gives up on the others. Returns false if it is not taken in.
    bool take_verdicts(const Rank_table& ranks, Rank rank, std::vector<bool> connected,
                       const std::vector<bool>& running, Transport& transport);
    std::chrono::milliseconds join_timeout() const;
    // Where this unit stands, for the hellos of a connect at `epoch`.
    Mesh_position mesh_position(std::uint64_t epoch, bool in_session) const;
    Vote vote();
    // Dials the units `request` (a pending table) takes into the running
    // set, if any; mutex held.
    void watch_joiners(const Configure_request& request);
    // The listener a session connects through, kept alive for it.
    std::shared_ptr<const Fd> session_listener() const;
    bool wait_while_paused();
    void set_phase(Session_phase phase);
    void show_phase(Session_phase phase);  // mutex held
    void hold_error(const std::string& error);

    const Config& config_;
    Unit_status& status_;
    const Stop_flag& process_stop_;
    // Ends the session in progress; lives as long as the unit because the
    // buffers wait on it. Re-armed at the start of each session.
    Stop_flag session_stop_;
    // The data path's threads (--data-threads): the TCP transport of each
    // session, the generator and the checker run their work on them.
    Data_threads data_threads_;
    std::optional<Unit_buffers> buffers_;
    // Where the unit is in the event stream, carried across sessions.
    std::uint64_t next_chunk_ = 0;
    std::uint64_t cycles_done_ = 0;

    mutable std::mutex mutex_;  // guards what follows
    // The data port's listener: a configure (HTTP thread) may replace it while
    // a session connects through the old one, which that session keeps alive.
    std::shared_ptr<const Fd> listener_;
    std::uint16_t listener_port_ = 0;
    std::condition_variable changed_;
    std::optional<Configure_request> current_;        // the table in force
    std::map<std::uint64_t, Configure_request> pending_;  // newer tables, by epoch
    // The joiners of the newest pending table, dialled before this unit
    // votes to switch to it.
    std::unique_ptr<Joiner_watch> joiners_;
    bool stop_vote_ = false;
    // A pause reaches the set: from the pause command to the next boundary
    // where the set pauses, the unit votes pause, resumed or not.
    bool pause_vote_ = false;
    // Resumed between a pause and the boundary where the set pauses: the
    // unit goes on at that boundary instead of waiting for another resume.
    // Lives no longer than pause_vote_, so it is used at the first such
    // boundary, one cycle later at most.
    bool kept_resume_ = false;
    // Started again after a stop, before the set stopped at the end of the
    // cycle that carries the stop vote: when it does, the unit stays RUNNING
    // and connects for the next session instead of going idle.
    bool kept_start_ = false;
    Session_phase phase_ = Session_phase::none;
    bool in_session_ = false;  // run() is in a session, which session_stop_ ends
    // This session's unit is one of a running set (connected, and taken in
    // where it joined), switches and pauses included: a table configured
    // now is the set's next one, not a reason to connect again.
    bool in_set_ = false;

    std::jthread signal_relay_;  // last: started once the rest is, stopped before it goes
};

}  // namespace eb
