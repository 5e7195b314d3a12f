#pragma once

#include <string>

#include "telemetry/unit_status.hpp"

namespace eb {

// Body of GET /status: one JSON object, keys as documented in the README.
std::string status_json(const Status_snapshot& status);

// Body of GET /metrics in the Prometheus text exposition format 0.0.4.
std::string prometheus_metrics(const Status_snapshot& status);

}  // namespace eb
