#pragma once

// Tools take the eb-builder flags of the unit they serve, plus a few of their
// own, which are taken out here before the rest goes to parse_command_line.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "buffers/shm_ring.hpp"

namespace eb::tools {

// Removes "--name value" / "--name=value" for each of `own` from `args` into
// the returned map. A flag given without a value maps to "".
inline std::map<std::string, std::string> take_own_flags(std::vector<std::string_view>& args,
                                                         const std::vector<std::string_view>& own) {
    std::map<std::string, std::string> taken;
    std::vector<std::string_view> rest;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string_view arg = args[i];
        const std::string_view flag = arg.substr(0, arg.find('='));
        if (std::find(own.begin(), own.end(), flag) == own.end()) {
            rest.push_back(arg);
            continue;
        }
        if (flag.size() != arg.size()) taken[std::string(flag)] = arg.substr(flag.size() + 1);
        else taken[std::string(flag)] = i + 1 < args.size() ? std::string(args[++i]) : "";
    }
    args = std::move(rest);
    return taken;
}

// In a builder pod the operator describes the unit to the readout driver
// and the consumer in their environment (operator/README.md, "Production
// data flow"): each (flag, variable) pair adds "--flag $VARIABLE" to `args`
// where the variable is set and the command line does not give the flag.
// `storage` keeps the added strings alive for the views in `args`.
inline void add_flags_from_environment(std::vector<std::string_view>& args, std::deque<std::string>& storage,
                                       const std::vector<std::pair<std::string_view, const char*>>& pairs) {
    for (const auto& [flag, variable] : pairs) {
        const char* value = std::getenv(variable);
        const bool given = std::any_of(args.begin(), args.end(), [&](std::string_view arg) {
            return arg.substr(0, arg.find('=')) == flag;
        });
        if (value == nullptr || given) continue;
        storage.emplace_back(flag);
        args.push_back(storage.back());
        storage.emplace_back(value);
        args.push_back(storage.back());
    }
}

// The ring a sidecar opens: in a pod, the one the operator names in
// `variable` (EB_MFP_RING, EB_MEP_RING: builderpod's ringName, which the
// builder's ring_name must match); elsewhere the builder's name for it.
inline std::string ring_to_open(const char* variable, const std::string& run, std::uint32_t rank, const char* what) {
    if (const char* named = std::getenv(variable); named != nullptr && *named != '\0') return named;
    return ring_name(run, rank, what);
}

}  // namespace eb::tools
