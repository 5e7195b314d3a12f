#include "telemetry/progress.hpp"

#include <cstdio>

#include "base/log.hpp"

namespace eb {

void report_progress(Unit_status& status, const Stop_flag& stop, std::chrono::milliseconds interval) {
    using Clock = std::chrono::steady_clock;
    Status_snapshot before = status.snapshot();
    Clock::time_point then = Clock::now();
    while (!stop.wait_for(interval)) {
        const Status_snapshot now = status.snapshot();
        const Clock::time_point when = Clock::now();
        const double seconds = std::chrono::duration<double>(when - then).count();
        char rates[96];
        std::snprintf(rates, sizeof rates, "%.0f events/s, %.1f MB/s",
                      static_cast<double>(now.events_built - before.events_built) / seconds,
                      static_cast<double>(now.bytes_built - before.bytes_built) / seconds / 1e6);
        status.set_rates(static_cast<double>(now.events_built - before.events_built) / seconds,
                         static_cast<double>(now.bytes_built - before.bytes_built) / seconds);
        log_info(control_state_name(now.state), " (", now.activity, ")", ": ", now.events_built, " events built (", rates, "), ",
                 now.events_incomplete, " incomplete, ", now.meps_built, " MEPs");
        before = now;
        then = when;
    }
}

}  // namespace eb
