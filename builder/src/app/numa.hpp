#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/numa_locality.hpp"

namespace eb {

// The CPUs of a kernel cpulist such as "0-3,8-11" (sysfs's format; a
// trailing newline is fine, "" is no CPUs), ascending and without repeats.
struct Cpu_list {
    std::vector<int> cpus;
    std::string error;  // what is malformed; empty if the text parsed

    bool ok() const { return error.empty(); }
};
Cpu_list parse_cpu_list(std::string_view text);

// Where a builder will run. A builder whose threads and buffers sit on the
// NUMA node of its RDMA device keeps the NIC's DMA and its own copies off the
// inter-socket link.
struct Numa_plan {
    std::string requested;           // as asked: "1", "mlx5_0", or "" for nothing
    std::optional<int> node;         // the node to pin to; empty: run unpinned
    std::vector<int> cpus;           // that node's CPUs
    std::string warning;             // why the request is not followed; empty if it is
    std::optional<int> device_node;  // the RDMA device's node, when a device was asked for and it knows
};

// Plans for `request`: "" (nothing: run unpinned), a node number ("1"), or an
// RDMA device name ("mlx5_0") whose node is read from
// <sysfs>/class/infiniband/<device>/device/numa_node. The node's CPUs come
// from <sysfs>/devices/system/node/node<N>/cpulist. A node or device that is
// not there is a warning, not an error: the builder still runs, unpinned.
Numa_plan plan_numa(std::string_view request, const std::string& sysfs = "/sys");

// Whether the process's cpuset lets it use memory of `node` alone, from the
// Mems_allowed_list line of /proc/self/status (`proc_status`): the kubelet's
// Memory Manager (or a single-node machine) binds memory without any memory
// policy, which a container's seccomp profile may not let it set.
bool memory_confined_to(std::string_view proc_status, int node);

// How local the calling thread ended up.
struct Numa_report {
    std::string requested;
    std::optional<int> node;           // the plan's node
    bool pinned = false;               // CPU affinity set, memory bound (by policy or the cpuset)
    bool cpus_local = false;           // the thread's CPU affinity lies within the node's CPUs
    bool memory_local = false;         // its memory policy or its cpuset binds it to exactly the node
    std::optional<bool> device_local;  // the RDMA device is on the pinned node; empty: no device asked for
    std::string warning;               // the plan's and the pinning's problems, "; "-separated
};

// Pins the calling thread to the plan's CPUs (sched_setaffinity) and binds its
// memory to the plan's node (set_mempolicy MPOL_BIND, needless where the
// cpuset allows that node's memory alone), then reads both back.
// Threads inherit both, so call it before starting any. Failures (EPERM,
// EINVAL) become warnings: the builder runs on, unpinned.
Numa_report apply_numa_plan(const Numa_plan& plan);

// The report as one JSON object, keys as the fields, null for empty optionals.
std::string numa_report_json(const Numa_report& report);

// What /metrics says of the report.
Numa_locality numa_locality(const Numa_report& report);

}  // namespace eb
