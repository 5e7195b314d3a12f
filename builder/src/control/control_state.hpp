#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace eb {

// The unit's state as the control API sees it (docs/control-api.md).
enum class Control_state { not_ready, ready, running, paused, error };

// What POST /control/<command> asks for.
enum class Command { configure, start, pause, resume, stop, reset };

// Every command, in the order the API lists them.
inline constexpr Command all_commands[] = {Command::configure, Command::start, Command::pause,
                                           Command::resume,    Command::stop,  Command::reset};

// "NOT_READY", "READY", "RUNNING", "PAUSED", "ERROR", as in /status.
std::string_view control_state_name(Control_state state);
// "configure", "start", ...: the last segment of the command's path.
std::string_view command_name(Command command);
std::optional<Command> parse_command(std::string_view name);

// The commands `state` accepts, in all_commands order.
std::vector<Command> allowed_commands(Control_state state);
// "configure, reset", for messages.
std::string command_list(const std::vector<Command>& commands);

// The outcome of a command in a state: where it leads, or why it is refused.
struct Transition {
    bool allowed = false;
    Control_state next = Control_state::not_ready;  // on refusal: the state it was refused in
    std::string refusal;  // e.g. "cannot start in state NOT_READY; allowed: configure, reset"
};

// The state machine of docs/control-api.md. Pure: the unit applies the
// result (a configure in RUNNING or PAUSED stays there, the table pending).
Transition transition(Control_state from, Command command);

}  // namespace eb
