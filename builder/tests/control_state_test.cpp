#include "control/control_state.hpp"

#include <gtest/gtest.h>

#include <map>
#include <utility>

namespace eb {
namespace {

using enum Control_state;

TEST(ControlState, TransitionsFollowTheTableOfTheDoc) {
    // docs/control-api.md, "State machine": every (state, command) pair that
    // is allowed, with where it leads; every other pair is refused.
    const std::map<std::pair<Control_state, Command>, Control_state> allowed = {
        {{not_ready, Command::configure}, ready},  {{not_ready, Command::reset}, not_ready},
        {{ready, Command::configure}, ready},      {{ready, Command::start}, running},
        {{ready, Command::reset}, not_ready},      {{running, Command::configure}, running},
        {{running, Command::pause}, paused},       {{running, Command::stop}, ready},
        {{running, Command::reset}, not_ready},    {{paused, Command::configure}, paused},
        {{paused, Command::resume}, running},      {{paused, Command::stop}, ready},
        {{paused, Command::reset}, not_ready},     {{error, Command::reset}, not_ready},
    };
    int pairs = 0;
    for (const Control_state from : {not_ready, ready, running, paused, error}) {
        for (const Command command : all_commands) {
            ++pairs;
            SCOPED_TRACE(std::string(control_state_name(from)) + " + " + std::string(command_name(command)));
            const Transition result = transition(from, command);
            const auto expected = allowed.find({from, command});
            ASSERT_EQ(result.allowed, expected != allowed.end());
            if (result.allowed) {
                EXPECT_EQ(result.next, expected->second);
                EXPECT_EQ(result.refusal, "");
            } else {
                EXPECT_EQ(result.next, from) << "a refused command leaves the state alone";
                EXPECT_TRUE(result.refusal.starts_with("cannot " + std::string(command_name(command)) + " in state " +
                                                       std::string(control_state_name(from)) + "; allowed: "))
                    << result.refusal;
            }
        }
    }
    EXPECT_EQ(pairs, 30);
}

TEST(ControlState, RefusalsListTheAllowedCommands) {
    EXPECT_EQ(transition(not_ready, Command::start).refusal,
              "cannot start in state NOT_READY; allowed: configure, reset");
    EXPECT_EQ(transition(ready, Command::pause).refusal,
              "cannot pause in state READY; allowed: configure, start, reset");
    EXPECT_EQ(transition(running, Command::resume).refusal,
              "cannot resume in state RUNNING; allowed: configure, pause, stop, reset");
    EXPECT_EQ(transition(paused, Command::start).refusal,
              "cannot start in state PAUSED; allowed: configure, resume, stop, reset");
    EXPECT_EQ(transition(error, Command::configure).refusal, "cannot configure in state ERROR; allowed: reset");
}

TEST(ControlState, AllowedCommandsInApiOrder) {
    using enum Command;
    EXPECT_EQ(allowed_commands(not_ready), (std::vector<Command>{configure, reset}));
    EXPECT_EQ(allowed_commands(ready), (std::vector<Command>{configure, start, reset}));
    EXPECT_EQ(allowed_commands(running), (std::vector<Command>{configure, pause, stop, reset}));
    EXPECT_EQ(allowed_commands(paused), (std::vector<Command>{configure, resume, stop, reset}));
    EXPECT_EQ(allowed_commands(error), (std::vector<Command>{reset}));
}

TEST(ControlState, NamesRoundTrip) {
    EXPECT_EQ(control_state_name(not_ready), "NOT_READY");
    EXPECT_EQ(control_state_name(ready), "READY");
    EXPECT_EQ(control_state_name(running), "RUNNING");
    EXPECT_EQ(control_state_name(paused), "PAUSED");
    EXPECT_EQ(control_state_name(error), "ERROR");
    for (const Command command : all_commands) EXPECT_EQ(parse_command(command_name(command)), command);
    EXPECT_EQ(command_name(Command::configure), "configure");
    EXPECT_EQ(parse_command("Start"), std::nullopt) << "paths are case-sensitive";
    EXPECT_EQ(parse_command(""), std::nullopt);
    EXPECT_EQ(parse_command("restart"), std::nullopt);
}

}  // namespace
}  // namespace eb
