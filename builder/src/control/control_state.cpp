#include "control/control_state.hpp"

namespace eb {
namespace {

// The table of docs/control-api.md; nullopt where the command is refused.
std::optional<Control_state> next_state(Control_state from, Command command) {
    using enum Control_state;
    // reset forgets the table from anywhere, ERROR included: the way out of ERROR.
    if (command == Command::reset) return not_ready;
    switch (from) {
        case not_ready:
            if (command == Command::configure) return ready;
            break;
        case ready:
            if (command == Command::configure) return ready;
            if (command == Command::start) return running;
            break;
        case running:
            // A configure while running leaves the switch pending, not the state.
            if (command == Command::configure) return running;
            if (command == Command::pause) return paused;
            if (command == Command::stop) return ready;
            break;
        case paused:
            if (command == Command::configure) return paused;
            if (command == Command::resume) return running;
            if (command == Command::stop) return ready;
            break;
        case error:
            break;
    }
    return std::nullopt;
}

}  // namespace

std::string_view control_state_name(Control_state state) {
    switch (state) {
        case Control_state::not_ready: return "NOT_READY";
        case Control_state::ready: return "READY";
        case Control_state::running: return "RUNNING";
        case Control_state::paused: return "PAUSED";
        case Control_state::error: return "ERROR";
    }
    return "UNKNOWN";
}

std::string_view command_name(Command command) {
    switch (command) {
        case Command::configure: return "configure";
        case Command::start: return "start";
        case Command::pause: return "pause";
        case Command::resume: return "resume";
        case Command::stop: return "stop";
        case Command::reset: return "reset";
    }
    return "unknown";
}

std::optional<Command> parse_command(std::string_view name) {
    for (const Command command : all_commands)
        if (command_name(command) == name) return command;
    return std::nullopt;
}

std::vector<Command> allowed_commands(Control_state state) {
    std::vector<Command> allowed;
    for (const Command command : all_commands)
        if (next_state(state, command)) allowed.push_back(command);
    return allowed;
}

std::string command_list(const std::vector<Command>& commands) {
    std::string list;
    for (const Command command : commands) {
        if (!list.empty()) list += ", ";
        list += command_name(command);
    }
    return list;
}

Transition transition(Control_state from, Command command) {
    if (const auto next = next_state(from, command)) return {true, *next, {}};
    return {false, from,
            "cannot " + std::string(command_name(command)) + " in state " + std::string(control_state_name(from)) +
                "; allowed: " + command_list(allowed_commands(from))};
}

}  // namespace eb
