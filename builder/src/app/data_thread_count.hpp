#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace eb {

// --data-threads unset: a TCP phase moves one send and one receive, which
// two threads copy at once; more would wait idle.
inline constexpr unsigned default_data_threads_cap = 2;

// The data threads a unit runs: `requested` (--data-threads; 0: unset, then
// the CPUs it may run on, at most default_data_threads_cap), or why that
// cannot be: more threads than CPUs would take turns on them.
std::variant<unsigned, std::string> choose_data_threads(std::uint32_t requested, unsigned allowed_cpus);

// The CPUs a CPU limit grants (Kubernetes' limits.cpu, spec.resources.cpus):
// a cgroup v2 cpu.max text ("QUOTA PERIOD", or "max PERIOD" for none), the
// quota in periods rounded up; nullopt for no limit or a text it cannot read.
std::optional<unsigned> cpus_of_cpu_max(std::string_view text);

// How many CPUs the calling thread may run on: its affinity (the cpuset of
// its container, narrowed to a NUMA node when pinned), no more than the
// container's CPU limit (/sys/fs/cgroup/cpu.max), which leaves the cpuset
// whole where the kubelet does not pin; at least 1.
unsigned allowed_cpu_count(const std::string& cgroup = "/sys/fs/cgroup");

}  // namespace eb
