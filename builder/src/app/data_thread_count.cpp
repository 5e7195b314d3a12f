#include "app/data_thread_count.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>

namespace eb {

std::variant<unsigned, std::string> choose_data_threads(std::uint32_t requested, unsigned allowed_cpus) {
    allowed_cpus = std::max(allowed_cpus, 1u);
    if (requested == 0) return std::min(allowed_cpus, default_data_threads_cap);
    if (requested > allowed_cpus)
        return "--data-threads " + std::to_string(requested) + ": this unit may run on " +
               std::to_string(allowed_cpus) + (allowed_cpus == 1 ? " CPU" : " CPUs") +
               " (its cpuset, on its NUMA node when pinned), and more threads would take turns on them; give at most " +
               std::to_string(allowed_cpus) + ", or more CPUs (spec.resources.cpus)";
    return static_cast<unsigned>(requested);
}

std::optional<unsigned> cpus_of_cpu_max(std::string_view text) {
    const std::size_t space = text.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    const std::string_view quota_text = text.substr(0, space);
    std::string_view period_text = text.substr(space + 1);
    while (!period_text.empty() && (period_text.back() == '\n' || period_text.back() == ' ')) period_text.remove_suffix(1);
    std::uint64_t quota = 0, period = 0;
    const auto number = [](std::string_view digits, std::uint64_t& value) {
        const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        return !digits.empty() && error == std::errc{} && end == digits.data() + digits.size();
    };
    if (quota_text == "max" || !number(quota_text, quota) || !number(period_text, period) || period == 0 || quota == 0)
        return std::nullopt;
    return static_cast<unsigned>(std::min<std::uint64_t>((quota + period - 1) / period, 1u << 20));
}

unsigned allowed_cpu_count(const std::string& cgroup) {
    cpu_set_t set;
    CPU_ZERO(&set);
    unsigned cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<unsigned>(CPU_COUNT(&set)) : 1;
    std::ifstream cpu_max(cgroup + "/cpu.max");
    std::string text;
    if (std::getline(cpu_max, text))
        if (const auto limit = cpus_of_cpu_max(text)) cpus = std::min(cpus, *limit);
    return std::max(cpus, 1u);
}

}  // namespace eb
