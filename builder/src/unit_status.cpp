#include "unit_status.hpp"

#include <utility>

namespace eb {

std::string_view state_name(Unit_state state) {
    switch (state) {
        case Unit_state::connecting: return "CONNECTING";
        case Unit_state::running: return "RUNNING";
        case Unit_state::stopped: return "STOPPED";
        case Unit_state::error: return "ERROR";
    }
    return "UNKNOWN";
}

void Unit_status::set_state(Unit_state state) {
    Unit_state current = state_.load();
    while (current != Unit_state::error && !state_.compare_exchange_weak(current, state)) {
    }
}

void Unit_status::fail(std::string error) {
    note_problem(std::move(error));
    state_.store(Unit_state::error);
}

void Unit_status::note_problem(std::string problem) {
    std::lock_guard lock(last_error_mutex_);
    last_error_ = std::move(problem);
}

void Unit_status::add_mep(std::uint64_t events_complete, std::uint64_t events_incomplete,
                          std::uint64_t bytes) {
    events_built_.fetch_add(events_complete, std::memory_order_relaxed);
    events_incomplete_.fetch_add(events_incomplete, std::memory_order_relaxed);
    meps_built_.fetch_add(1, std::memory_order_relaxed);
    bytes_built_.fetch_add(bytes, std::memory_order_relaxed);
}

Status_snapshot Unit_status::snapshot() const {
    Status_snapshot snapshot{.rank = rank_,
                             .units = units_,
                             .state = state_.load(),
                             .events_built = events_built_.load(std::memory_order_relaxed),
                             .events_incomplete = events_incomplete_.load(std::memory_order_relaxed),
                             .meps_built = meps_built_.load(std::memory_order_relaxed),
                             .bytes_built = bytes_built_.load(std::memory_order_relaxed),
                             .last_error = {},
                             .parse_errors = {}};
    for (std::size_t kind = 0; kind < parse_error_kinds; ++kind)
        snapshot.parse_errors[kind] = parse_errors_.get(static_cast<Parse_error>(kind));
    std::lock_guard lock(last_error_mutex_);
    snapshot.last_error = last_error_;
    return snapshot;
}

}  // namespace eb
