#pragma once

#include <optional>

namespace eb {

// What the unit's NUMA placement achieved, as /metrics reports it
// (eb_numa_local). The full report, with the node and the warnings, is
// app/numa.hpp's Numa_report, which /status carries as JSON.
struct Numa_locality {
    bool requested = false;  // a node or an RDMA device was asked for (--numa)
    bool cpus_local = false;
    bool memory_local = false;
    std::optional<bool> device_local;  // empty: no RDMA device was asked for
};

}  // namespace eb
