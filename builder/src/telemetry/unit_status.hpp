#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/control_state.hpp"
#include "transport/data_traffic.hpp"
#include "buffers/consumer_report.hpp"
#include "base/histogram.hpp"
#include "buffers/mep_tally.hpp"
#include "telemetry/numa_locality.hpp"
#include "formats/parse_error.hpp"
#include "base/rank.hpp"
#include "transport/refusal.hpp"
#include "transport/transport.hpp"
#include "transport/transport_report.hpp"

namespace eb {

// How this unit sees each rank of its table.
enum class Link_state { self, up, connecting, lost, dummy };
std::string_view link_state_name(Link_state state);

// A consistent-enough copy of the unit's status for reporting.
struct Status_snapshot {
    Rank rank = 0;
    Rank units = 0;
    Control_state state = Control_state::not_ready;
    std::string activity;  // what the data path does now: idle, connecting, building, paused, standby
    bool live = false;     // live or dummy in its table
    std::uint32_t epoch = 0;
    std::uint32_t pending_epoch = 0;
    std::uint64_t next_event = 0;  // the first event of the set's next cycle
    std::uint64_t events_built = 0;       // complete and verified
    std::uint64_t events_incomplete = 0;  // delivered flagged, or failed a check; never counted as built
    std::uint64_t events_dropped = 0;     // not delivered: a source or the BU was lost, or the output full
    std::uint64_t events_in_doubt = 0;    // chunks this BU left the set on, which the set may not have counted
    std::uint64_t meps_built = 0;         // MEPs assembled and handed to the consumer
    std::uint64_t meps_discarded = 0;     // assembled and dropped here: the output had no room in time
    // Building time since the output last took a MEP, while every MEP since
    // has been dropped here (its consumer gone or stuck); 0 once one is taken.
    double output_stalled_seconds = 0;
    std::uint64_t bytes_built = 0;        // bytes of those MEPs
    double building_seconds = 0;          // time spent with activity "building", all sessions
    std::uint64_t network_bytes_sent = 0;      // data the transport moved to other units (Data_traffic)
    std::uint64_t network_bytes_received = 0;  // and from them
    double network_seconds = 0;                // time spent waiting for data transfers to complete
    std::uint64_t network_sends_held = 0;      // MFP sends held until their BU had posted the receive
    double network_send_held_seconds = 0;      // and how long they waited
    double events_per_second = 0;
    double bytes_per_second = 0;
    std::vector<Link_state> peers;  // by rank
    std::vector<bool> lost_reached;  // by rank: lost, and its data port answers a dial again (Lost_peer_probe)
    bool probing = false;            // a Lost_peer_probe runs: lost_reached says something
    std::uint64_t peers_lost = 0;
    std::array<std::uint64_t, link_failure_kinds> link_failures{};  // by Link_failure
    std::array<std::uint64_t, refusal_kinds> refusals{};            // data connections refused, by Refusal
    std::string last_error;
    std::array<std::uint64_t, parse_error_kinds> parse_errors{};  // by Parse_error
    double mfp_ring_fill = -1;  // fraction; < 0: no such ring
    double mep_ring_fill = -1;
    std::optional<Consumer_counts> consumer;  // what the MEP ring's consumer published, if it did
    std::string numa_json = "null";
    Numa_locality numa;
    Transport_report transport;
    Histogram_snapshot phase_time;
    Histogram_snapshot barrier_wait;
};

// The unit's state and counters, written by the data path and the control
// API and read by the HTTP and progress threads. Counters are relaxed
// atomics: each is exact, the set of them is not read as one transaction.
class Unit_status final : public Mep_tally {
public:
    explicit Unit_status(Rank rank);

    // ERROR is left only by reset(); set_state() does not leave it.
    void set_state(Control_state state);
    Control_state state() const { return state_.load(); }
    void fail(std::string error);
    void reset();  // ERROR or not: NOT_READY, error kept in last_error
    // Also times the activity "building", which rates over a whole run need.
    void set_activity(std::string_view activity);
    // Remembers a problem that did not stop the unit (e.g. incomplete events).
    void note_problem(std::string problem) override;

    // A new table: every rank starts as dummy or connecting.
    void set_table(std::uint32_t epoch, const std::vector<bool>& live);
    void set_pending_epoch(std::uint32_t epoch) { pending_epoch_.store(epoch); }
    void set_next_event(std::uint64_t event) { next_event_.store(event, std::memory_order_relaxed); }
    void set_peer(Rank peer, Link_state state);
    void peer_lost(Rank peer, Link_failure failure);
    // Whether the unit has lost `peer` now, and whether a lost peer's data
    // port answers a dial again (Lost_peer_probe); a new state or table
    // forgets the latter.
    bool peer_is_lost(Rank peer) const;
    void set_lost_peer_reached(Rank peer, bool reached);
    void set_probing(bool probing);

    void add_mep(std::uint64_t events_complete, std::uint64_t events_incomplete, std::uint64_t bytes) override;
    void add_discarded_mep(std::uint64_t events) override;
    std::atomic<std::uint64_t>& events_dropped() { return events_dropped_; }
    std::atomic<std::uint64_t>& events_in_doubt() { return events_in_doubt_; }
    void set_rates(double events_per_second, double bytes_per_second);
    void set_ring_fill(double mfp, double mep);
    // Reads what the consumer of the MEP ring `ring` publishes into every
    // snapshot from now on.
    void watch_consumer(const std::string& ring);
    // The NUMA report as /status shows it, and what /metrics says of it.
    void set_numa(std::string json, Numa_locality locality);
    void set_transport(Transport_report report);

    // What the unit's transports moved over the network (they count it).
    Data_traffic& traffic() { return traffic_; }
    Histogram& phase_time() { return phase_time_; }
    Histogram& barrier_wait() { return barrier_wait_; }
    // Rejected MFPs and MEPs, by kind.
    Parse_error_counts& parse_errors() { return parse_errors_; }
    // Data connections refused (stray, hostile or misconfigured dials).
    Refusal_counts& refusals() { return refusals_; }

    Status_snapshot snapshot() const;

private:
    // Time spent with activity "building", this spell included; mutex_ held.
    std::chrono::steady_clock::duration built_for_locked() const;

    const Rank rank_;
    std::atomic<Control_state> state_{Control_state::not_ready};
    std::atomic<std::uint32_t> pending_epoch_{0};
    std::atomic<std::uint64_t> next_event_{0};
    std::atomic<std::uint64_t> events_built_{0};
    std::atomic<std::uint64_t> events_incomplete_{0};
    std::atomic<std::uint64_t> events_dropped_{0};
    std::atomic<std::uint64_t> events_in_doubt_{0};
    std::atomic<std::uint64_t> meps_built_{0};
    std::atomic<std::uint64_t> meps_discarded_{0};
    std::atomic<std::uint64_t> discard_streak_{0};  // MEPs dropped here since the output last took one
    std::atomic<std::uint64_t> bytes_built_{0};
    Parse_error_counts parse_errors_;
    Refusal_counts refusals_;
    Data_traffic traffic_;
    Histogram phase_time_;
    Histogram barrier_wait_;
    mutable std::mutex mutex_;  // guards the rest
    std::string activity_ = "idle";
    std::chrono::steady_clock::time_point building_since_;  // while activity_ is "building"
    std::chrono::steady_clock::duration built_for_{};       // earlier spells of "building"
    std::chrono::steady_clock::duration streak_began_{};    // building time at the streak's first drop
    std::uint32_t epoch_ = 0;
    bool live_ = false;
    std::vector<Link_state> peers_;
    std::vector<bool> lost_reached_;
    bool probing_ = false;
    std::uint64_t peers_lost_ = 0;
    std::array<std::uint64_t, link_failure_kinds> link_failures_{};
    std::string last_error_;
    double events_per_second_ = 0, bytes_per_second_ = 0;
    double mfp_ring_fill_ = -1, mep_ring_fill_ = -1;
    std::unique_ptr<Consumer_report_reader> consumer_;
    std::string numa_json_ = "null";
    Numa_locality numa_;
    Transport_report transport_;
};

}  // namespace eb
