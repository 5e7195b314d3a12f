#include "app/numa.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "base/json_text.hpp"

// Only the constant: the calls go through syscall(), so no libnuma is needed.
#if __has_include(<numaif.h>)
#include <numaif.h>
#else
#define MPOL_BIND 2  // kernel ABI, as in <numaif.h> and <linux/mempolicy.h>
#endif

namespace eb {
namespace {

// Far above any machine's CPUs and nodes; bounds what a bad file can make us allocate.
constexpr int cpu_limit = 1 << 16;
constexpr int node_limit = 1 << 10;  // the kernel's MAX_NUMNODES at most
constexpr std::size_t long_bits = sizeof(unsigned long) * CHAR_BIT;

// A whole decimal number, sign allowed only if `allow_sign`.
std::optional<int> parse_int(std::string_view text, bool allow_sign = false) {
    if (text.empty() || (!allow_sign && text.front() == '-')) return std::nullopt;
    int value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// Digits name a NUMA node; anything else an RDMA device.
bool is_node_number(std::string_view request) {
    return !request.empty() &&
           std::all_of(request.begin(), request.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
    return text;
}

std::optional<std::string> read_text(const std::string& path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// "0, 1", for telling which nodes there are instead.
std::string existing_nodes(const std::string& sysfs) {
    std::vector<int> nodes;
    std::error_code error;
    for (std::filesystem::directory_iterator entry(sysfs + "/devices/system/node", error), end;
         !error && entry != end; entry.increment(error)) {
        const std::string name = entry->path().filename().string();
        if (!name.starts_with("node")) continue;
        if (const auto node = parse_int(std::string_view(name).substr(4))) nodes.push_back(*node);
    }
    std::sort(nodes.begin(), nodes.end());
    std::string list;
    for (const int node : nodes) list += (list.empty() ? "" : ", ") + std::to_string(node);
    return list.empty() ? "none" : list;
}

std::string errno_text(int error) { return std::generic_category().message(error); }

// A set big enough for `cpus` CPUs, in whole cpu_set_t's for the *_S macros.
std::vector<cpu_set_t> cpu_sets_for(int cpus) {
    return std::vector<cpu_set_t>(static_cast<std::size_t>(cpus) / CPU_SETSIZE + 1);
}

std::string pin_cpus(const std::vector<int>& cpus) {
    std::vector<cpu_set_t> sets = cpu_sets_for(cpus.back() + 1);
    const std::size_t bytes = sets.size() * sizeof(cpu_set_t);
    CPU_ZERO_S(bytes, sets.data());
    for (const int cpu : cpus) CPU_SET_S(static_cast<std::size_t>(cpu), bytes, sets.data());
    if (::sched_setaffinity(0, bytes, sets.data()) != 0) return "sched_setaffinity: " + errno_text(errno);
    return {};
}

std::string bind_memory(int node) {
    std::vector<unsigned long> mask(static_cast<std::size_t>(node) / long_bits + 1);
    mask.back() |= 1UL << (static_cast<std::size_t>(node) % long_bits);
    // The kernel reads maxnode - 1 bits.
    if (::syscall(SYS_set_mempolicy, MPOL_BIND, mask.data(), mask.size() * long_bits + 1) != 0)
        return "set_mempolicy(MPOL_BIND, node " + std::to_string(node) + "): " + errno_text(errno);
    return {};
}

// The calling thread may run only on CPUs of `node_cpus` (and on some).
bool affinity_within(const std::vector<int>& node_cpus) {
    // sched_getaffinity wants room for every CPU the kernel could have.
    for (int room = CPU_SETSIZE; room <= cpu_limit; room *= 2) {
        std::vector<cpu_set_t> sets = cpu_sets_for(room - 1);
        const std::size_t bytes = sets.size() * sizeof(cpu_set_t);
        if (::sched_getaffinity(0, bytes, sets.data()) != 0) {
            if (errno == EINVAL) continue;
            return false;
        }
        const int allowed = CPU_COUNT_S(bytes, sets.data());
        int inside = 0;
        for (const int cpu : node_cpus)
            if (CPU_ISSET_S(static_cast<std::size_t>(cpu), bytes, sets.data())) ++inside;
        return allowed > 0 && inside == allowed;
    }
    return false;
}

// The calling thread's memory policy is MPOL_BIND to `node` alone.
bool memory_bound_to(int node) {
    int mode = -1;
    std::vector<unsigned long> mask(node_limit / long_bits);
    if (::syscall(SYS_get_mempolicy, &mode, mask.data(), mask.size() * long_bits, nullptr, 0UL) != 0) return false;
    if (mode != MPOL_BIND) return false;
    for (std::size_t word = 0; word < mask.size(); ++word) {
        const bool node_word = word == static_cast<std::size_t>(node) / long_bits;
        const unsigned long expected = node_word ? 1UL << (static_cast<std::size_t>(node) % long_bits) : 0UL;
        if (mask[word] != expected) return false;
    }
    return true;
}

std::string json_optional(const std::optional<int>& value) { return value ? std::to_string(*value) : "null"; }
std::string json_bool(bool value) { return value ? "true" : "false"; }

}  // namespace

Cpu_list parse_cpu_list(std::string_view text) {
    const std::string_view list = trim(text);
    const auto fail = [&](std::string what) { return Cpu_list{{}, "cpulist \"" + std::string(list) + "\": " + what}; };
    Cpu_list result;
    if (list.empty()) return result;  // a node with memory but no CPUs
    for (std::size_t start = 0; start <= list.size();) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        const std::string_view item = list.substr(start, comma - start);
        start = comma + 1;
        if (item.empty()) return fail("empty entry");
        const std::size_t dash = item.find('-');
        const auto first = parse_int(item.substr(0, dash));
        const auto last = dash == std::string_view::npos ? first : parse_int(item.substr(dash + 1));
        if (!first || !last) return fail("\"" + std::string(item) + "\" is not a CPU or a range of CPUs");
        if (*last < *first) return fail("range " + std::string(item) + " runs backwards");
        if (*last >= cpu_limit)
            return fail("CPU " + std::to_string(*last) + " is beyond " + std::to_string(cpu_limit - 1));
        for (int cpu = *first; cpu <= *last; ++cpu) result.cpus.push_back(cpu);
    }
    std::sort(result.cpus.begin(), result.cpus.end());
    result.cpus.erase(std::unique(result.cpus.begin(), result.cpus.end()), result.cpus.end());
    return result;
}

bool memory_confined_to(std::string_view proc_status, int node) {
    constexpr std::string_view key = "Mems_allowed_list:";
    for (std::size_t start = 0; start < proc_status.size();) {
        const std::size_t end = std::min(proc_status.find('\n', start), proc_status.size());
        const std::string_view line = proc_status.substr(start, end - start);
        start = end + 1;
        if (!line.starts_with(key)) continue;
        std::string_view list = line.substr(key.size());
        while (!list.empty() && (list.front() == '\t' || list.front() == ' ')) list.remove_prefix(1);
        const Cpu_list nodes = parse_cpu_list(list);  // the same list format
        return nodes.ok() && nodes.cpus == std::vector<int>{node};
    }
    return false;
}

Numa_plan plan_numa(std::string_view request, const std::string& sysfs) {
    Numa_plan plan;
    plan.requested = std::string(request);
    if (request.empty()) return plan;
    const auto unpinned = [&](std::string why) {
        plan.warning = why + "; running unpinned";
        return plan;
    };

    std::string node_text(request);
    std::string whose;  // " (RDMA device mlx5_0's)" when the node came from a device
    if (!is_node_number(request)) {
        const std::string device(request);
        if (device.find('/') != std::string::npos || device == "..")
            return unpinned("\"" + device + "\" is neither a NUMA node number nor an RDMA device name");
        const std::string path = sysfs + "/class/infiniband/" + device + "/device/numa_node";
        const auto text = read_text(path);
        if (!text) return unpinned("RDMA device " + device + " not found (no " + path + ")");
        const auto device_node = parse_int(trim(*text), true);
        if (!device_node) return unpinned("RDMA device " + device + ": " + path + " holds no node number");
        if (*device_node < 0)
            return unpinned("RDMA device " + device + " does not know its NUMA node (" + path + " reads " +
                            std::to_string(*device_node) + ")");
        plan.device_node = device_node;
        node_text = std::to_string(*device_node);
        whose = " (RDMA device " + device + "'s)";
    }

    const auto node = parse_int(node_text);
    const std::string node_dir = sysfs + "/devices/system/node/node" + node_text;
    std::error_code error;
    if (!node || *node >= node_limit || !std::filesystem::is_directory(node_dir, error))
        return unpinned("NUMA node " + node_text + whose + " does not exist on this machine (nodes: " +
                        existing_nodes(sysfs) + ")");
    const auto cpulist = read_text(node_dir + "/cpulist");
    if (!cpulist) return unpinned("cannot read " + node_dir + "/cpulist");
    Cpu_list cpus = parse_cpu_list(*cpulist);
    if (!cpus.ok()) return unpinned(node_dir + "/cpulist: " + cpus.error);
    if (cpus.cpus.empty()) return unpinned("NUMA node " + node_text + whose + " has no CPUs");
    plan.node = node;
    plan.cpus = std::move(cpus.cpus);
    return plan;
}

Numa_report apply_numa_plan(const Numa_plan& plan) {
    Numa_report report;
    report.requested = plan.requested;
    report.node = plan.node;
    std::vector<std::string> warnings;
    if (!plan.warning.empty()) warnings.push_back(plan.warning);
    if (plan.node && !plan.cpus.empty()) {
        const std::string cpus_problem = pin_cpus(plan.cpus);
        const auto status = read_text("/proc/self/status");
        const bool confined = status && memory_confined_to(*status, *plan.node);
        std::string memory_problem = bind_memory(*plan.node);
        if (confined) memory_problem.clear();  // bound already
        for (const std::string& problem : {cpus_problem, memory_problem})
            if (!problem.empty())
                warnings.push_back("cannot pin to NUMA node " + std::to_string(*plan.node) + ": " + problem);
        report.pinned = cpus_problem.empty() && memory_problem.empty();
        report.cpus_local = affinity_within(plan.cpus);
        report.memory_local = confined || memory_bound_to(*plan.node);
    }
    if (!plan.requested.empty() && !is_node_number(plan.requested))
        report.device_local = report.pinned && plan.device_node && plan.device_node == plan.node;
    for (const std::string& warning : warnings) report.warning += (report.warning.empty() ? "" : "; ") + warning;
    return report;
}

std::string numa_report_json(const Numa_report& report) {
    return "{\"requested\":" + json_string(report.requested) + ",\"node\":" + json_optional(report.node) +
           ",\"pinned\":" + json_bool(report.pinned) + ",\"cpus_local\":" + json_bool(report.cpus_local) +
           ",\"memory_local\":" + json_bool(report.memory_local) + ",\"device_local\":" +
           (report.device_local ? json_bool(*report.device_local) : "null") +
           ",\"warning\":" + json_string(report.warning) + "}";
}

Numa_locality numa_locality(const Numa_report& report) {
    return {.requested = !report.requested.empty(),
            .cpus_local = report.cpus_local,
            .memory_local = report.memory_local,
            .device_local = report.device_local};
}

}  // namespace eb
