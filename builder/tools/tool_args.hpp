#pragma once

// Tools take the eb-builder flags of the unit they serve, plus a few of their
// own, which are taken out here before the rest goes to parse_command_line.

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace eb::tools
