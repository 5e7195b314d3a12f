#pragma once

#include <chrono>

#include "base/stop_flag.hpp"
#include "telemetry/unit_status.hpp"

namespace eb {

// Logs a progress line every `interval` until stop: state, events built and
// the rates since the previous line.
void report_progress(Unit_status& status, const Stop_flag& stop,
                     std::chrono::milliseconds interval = std::chrono::seconds(5));

}  // namespace eb
