#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "parse_error.hpp"
#include "rank.hpp"

namespace eb {

enum class Unit_state { connecting, running, stopped, error };

// Upper-case name, as reported in /status.
std::string_view state_name(Unit_state state);

// A consistent-enough copy of the unit's status for reporting.
struct Status_snapshot {
    Rank rank = 0;
    Rank units = 0;
    Unit_state state = Unit_state::connecting;
    std::uint64_t events_built = 0;       // complete and verified
    std::uint64_t events_incomplete = 0;  // failed a check; never counted as built
    std::uint64_t meps_built = 0;         // MEPs assembled and handed to the consumer
    std::uint64_t bytes_built = 0;        // bytes of those MEPs
    std::string last_error;
    std::array<std::uint64_t, parse_error_kinds> parse_errors{};  // by Parse_error
};

// The unit's state and counters, written by the data path and read by the
// HTTP and progress threads. Counters are relaxed atomics: each is exact, the
// set of them is not read as one transaction.
class Unit_status {
public:
    Unit_status(Rank rank, Rank units) : rank_(rank), units_(units) {}

    // ERROR is sticky: leaving it will take a reset from the control API.
    void set_state(Unit_state state);
    void fail(std::string error);
    // Remembers a problem that did not stop the unit (e.g. incomplete events).
    void note_problem(std::string problem);
    void add_mep(std::uint64_t events_complete, std::uint64_t events_incomplete, std::uint64_t bytes);

    Status_snapshot snapshot() const;

    // Rejected MFPs and MEPs, by kind.
    Parse_error_counts& parse_errors() { return parse_errors_; }

private:
    const Rank rank_;
    const Rank units_;
    std::atomic<Unit_state> state_{Unit_state::connecting};
    std::atomic<std::uint64_t> events_built_{0};
    std::atomic<std::uint64_t> events_incomplete_{0};
    std::atomic<std::uint64_t> meps_built_{0};
    std::atomic<std::uint64_t> bytes_built_{0};
    Parse_error_counts parse_errors_;
    mutable std::mutex last_error_mutex_;
    std::string last_error_;
};

}  // namespace eb
