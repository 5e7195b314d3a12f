#include "control/control_api.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "golden.hpp"

namespace eb {
namespace {

using Json = nlohmann::ordered_json;

// A stand-in for the unit: records the commands that reach it and answers
// with a canned outcome; applies allowed transitions like the unit would.
class Recording_target final : public Control_target {
public:
    struct Call {
        Command command;
        std::optional<Configure_request> configure;
    };

    Command_outcome command(Command command, const Configure_request* configure) override {
        calls.push_back({command, configure ? std::optional(*configure) : std::nullopt});
        if (next_outcome) return *std::exchange(next_outcome, std::nullopt);
        const Transition result = transition(current, command);
        if (!result.allowed) return {Command_outcome::Kind::refused, result.refusal};
        current = result.next;
        return {};
    }
    std::string status_json() const override {
        return R"({"state":")" + std::string(control_state_name(current)) + R"("})";
    }
    std::string metrics_text() const override { return "eb_up 1\n"; }
    Control_state state() const override { return current; }
    std::optional<Rank> fixed_rank() const override { return rank; }

    Control_state current = Control_state::not_ready;
    std::optional<Rank> rank;
    std::optional<Command_outcome> next_outcome;
    std::vector<Call> calls;
};

const Control_token token("s3cret");

struct Request_text {
    std::string method, path, authorization, body;
};

Http_response send(Recording_target& target, const Request_text& text, const Control_token& with = token) {
    Http_request request{text.method, text.path, {}, text.body};
    if (!text.authorization.empty()) request.headers.push_back({"authorization", text.authorization});
    return handle_request(request, with, target);
}

Http_response command(Recording_target& target, std::string_view name, std::string body = {}) {
    return send(target, {"POST", "/control/" + std::string(name), "Bearer s3cret", std::move(body)});
}

std::optional<std::string> header(const Http_response& response, std::string_view name) {
    for (const auto& [key, value] : response.headers)
        if (key == name) return value;
    return std::nullopt;
}

Json json_body(const Http_response& response) {
    EXPECT_EQ(response.content_type, "application/json");
    return Json::parse(response.body);
}

// A small valid configure body: ranks 0 and 1, both live, epoch `epoch`.
std::string configure_body(Rank rank, int epoch = 1) {
    return Json{{"rank", rank},
                {"table",
                 {{"version", "eventbuilder.daq.io/ranktable/v1"},
                  {"epoch", epoch},
                  {"layout", "Folded"},
                  {"ranks",
                   {{{"rank", 0}, {"address", "eb-0:7000"}, {"state", "live"}},
                    {{"rank", 1}, {"address", "eb-1:7000"}, {"state", "live"}}}}}}}
        .dump();
}

TEST(ControlApi, ReadsNeedNoToken) {
    Recording_target target;
    struct Case {
        std::string_view method, path;
        int status;
        std::string_view content_type, body;
    };
    const Case cases[] = {
        {"GET", "/status", 200, "application/json", "{\"state\":\"NOT_READY\"}\n"},
        {"HEAD", "/status", 200, "application/json", "{\"state\":\"NOT_READY\"}\n"},
        {"GET", "/metrics", 200, "text/plain; version=0.0.4; charset=utf-8", "eb_up 1\n"},
        {"GET", "/healthz", 200, "text/plain; charset=utf-8", "ok\n"},
    };
    for (const auto& c : cases) {
        for (const Control_token& with : {token, Control_token()}) {
            const Http_response response = send(target, {std::string(c.method), std::string(c.path), "", ""}, with);
            EXPECT_EQ(response.status, c.status) << c.path;
            EXPECT_EQ(response.content_type, c.content_type) << c.path;
            EXPECT_EQ(response.body, c.body) << c.path;
        }
    }
    EXPECT_TRUE(target.calls.empty());
}

TEST(ControlApi, ReadyOnlyOnceConfiguredAndNotFailed) {
    Recording_target target;
    using enum Control_state;
    for (const Control_state state : {not_ready, ready, running, paused, error}) {
        target.current = state;
        const Http_response response = send(target, {"GET", "/readyz", "", ""});
        const bool ready_now = state == ready || state == running || state == paused;
        EXPECT_EQ(response.status, ready_now ? 200 : 503) << control_state_name(state);
        if (ready_now) {
            EXPECT_EQ(response.body, "ready\n");
        } else {
            EXPECT_EQ(json_body(response)["state"], control_state_name(state));
            EXPECT_EQ(json_body(response)["error"], "not ready: state " + std::string(control_state_name(state)));
        }
    }
}

TEST(ControlApi, CommandsNeedTheRightToken) {
    Recording_target target;
    struct Case {
        std::string authorization;
        std::string error;
    };
    const Case cases[] = {
        {"", "missing Authorization: Bearer <token>"},
        {"Basic czNjcmV0", "missing Authorization: Bearer <token>"},
        {"Bearer", "missing Authorization: Bearer <token>"},
        {"Bearer s3cre", "wrong bearer token"},
        {"Bearer s3cret2", "wrong bearer token"},
        {"Bearer S3CRET", "wrong bearer token"},
    };
    for (const auto& c : cases) {
        const Http_response response = send(target, {"POST", "/control/reset", c.authorization, ""});
        EXPECT_EQ(response.status, 401) << c.authorization;
        EXPECT_EQ(header(response, "WWW-Authenticate"), "Bearer");
        EXPECT_EQ(json_body(response), (Json{{"error", c.error}}));
    }
    EXPECT_TRUE(target.calls.empty()) << "no command reaches the unit without the token";

    const Http_response right = send(target, {"POST", "/control/reset", "bearer s3cret", ""});
    EXPECT_EQ(right.status, 200);
    EXPECT_EQ(right.body, "{\"state\":\"NOT_READY\"}\n") << "success answers with the status";
    ASSERT_EQ(target.calls.size(), 1u);
    EXPECT_EQ(target.calls[0].command, Command::reset);
    EXPECT_FALSE(target.calls[0].configure);
}

TEST(ControlApi, CommandsAreOffWithoutAConfiguredToken) {
    Recording_target target;
    for (const std::string authorization : {"", "Bearer s3cret", "Bearer "}) {
        const Http_response response = send(target, {"POST", "/control/start", authorization, ""}, Control_token());
        EXPECT_EQ(response.status, 403);
        EXPECT_EQ(json_body(response),
                  (Json{{"error",
                         "the control API is disabled: start eb-builder with --token-file or EB_CONTROL_TOKEN"}}));
    }
    EXPECT_TRUE(target.calls.empty());
}

TEST(ControlApi, RefusedTransitionIs409WithTheAllowedCommands) {
    Recording_target target;
    const Http_response response = command(target, "start");
    EXPECT_EQ(response.status, 409);
    EXPECT_EQ(response.body,
              R"({"error":"cannot start in state NOT_READY; allowed: configure, reset","state":"NOT_READY",)"
              R"("allowed":["configure","reset"]})"
              "\n");

    target.current = Control_state::running;
    target.next_outcome = Command_outcome{Command_outcome::Kind::refused, "epoch 1 is older than the current 2"};
    const Json refused = json_body(command(target, "configure", configure_body(0)));
    EXPECT_EQ(refused["error"], "epoch 1 is older than the current 2");
    EXPECT_EQ(refused["state"], "RUNNING");
    EXPECT_EQ(refused["allowed"], (Json{"configure", "pause", "stop", "reset"}));
}

TEST(ControlApi, InvalidOutcomeIs400) {
    Recording_target target;
    target.next_outcome = Command_outcome{Command_outcome::Kind::invalid, "table.ranks[0].address: \"quoted\"\n"};
    const Http_response response = command(target, "configure", configure_body(1));
    EXPECT_EQ(response.status, 400);
    EXPECT_EQ(response.body, R"({"error":"table.ranks[0].address: \"quoted\"\n"})"
                             "\n")
        << "escaped as JSON";
}

TEST(ControlApi, ConfigureCarriesTheParsedTable) {
    Recording_target target;
    target.rank = 1;
    const Http_response response = command(target, "configure", configure_body(1, 3));
    EXPECT_EQ(response.status, 200) << response.body;
    EXPECT_EQ(response.body, "{\"state\":\"READY\"}\n");
    ASSERT_EQ(target.calls.size(), 1u);
    EXPECT_EQ(target.calls[0].command, Command::configure);
    ASSERT_TRUE(target.calls[0].configure);
    EXPECT_EQ(target.calls[0].configure->rank, 1u);
    EXPECT_EQ(target.calls[0].configure->epoch, 3u);
    EXPECT_EQ(target.calls[0].configure->peers, (std::vector<Peer_address>{{"eb-0", 7000}, {"eb-1", 7000}}));

    EXPECT_EQ(command(target, "start").status, 200);
    EXPECT_EQ(target.current, Control_state::running);
}

TEST(ControlApi, BadBodiesAre400AndNeverReachTheUnit) {
    Recording_target target;
    target.rank = 1;  // started with --rank 1
    struct Case {
        std::string_view name;
        std::string body;
        std::string error;
    };
    const Case cases[] = {
        {"configure", "", "request body: not valid JSON at byte 1: "},
        {"configure", "{\"rank\":", "request body: not valid JSON at byte 9: "},
        {"configure", configure_body(0),
         "rank 0: this process was started with --rank 1; send rank 1 or start it without --rank"},
        {"configure", configure_body(1, 0), "table.epoch '0': expected a whole number >= 1"},
        {"start", "{}", "start takes no body; send an empty POST"},
        {"reset", "x", "reset takes no body; send an empty POST"},
    };
    for (const auto& c : cases) {
        const Http_response response = command(target, c.name, c.body);
        EXPECT_EQ(response.status, 400) << c.body;
        const std::string error = json_body(response)["error"];
        EXPECT_TRUE(error.starts_with(c.error)) << error;
    }
    EXPECT_TRUE(target.calls.empty());
}

TEST(ControlApi, UnknownCommandsAndPathsAre404) {
    Recording_target target;
    for (const std::string_view name : {"restart", "", "start/now", "Start"}) {
        const Http_response response = command(target, name);
        EXPECT_EQ(response.status, 404) << name;
        EXPECT_EQ(json_body(response)["error"], "unknown command '" + std::string(name) +
                                                    "'; expected one of configure, start, pause, resume, stop, reset");
    }
    // Without the token, an unknown command is still 401: nothing is told before authentication.
    EXPECT_EQ(send(target, {"POST", "/control/restart", "", ""}).status, 401);
    for (const std::string_view path : {"/", "/status/", "/control", "/statusx", "/Status"}) {
        const Http_response response = send(target, {"GET", std::string(path), "", ""});
        EXPECT_EQ(response.status, 404) << path;
        EXPECT_TRUE(json_body(response)["error"].get<std::string>().starts_with("no such path: " + std::string(path)));
    }
    EXPECT_TRUE(target.calls.empty());
}

TEST(ControlApi, WrongMethodIs405WithAllow) {
    Recording_target target;
    struct Case {
        std::string_view method, path, allow;
    };
    const Case cases[] = {
        {"POST", "/status", "GET, HEAD"},      {"PUT", "/metrics", "GET, HEAD"},
        {"DELETE", "/healthz", "GET, HEAD"},   {"POST", "/readyz", "GET, HEAD"},
        {"GET", "/control/start", "POST"},     {"HEAD", "/control/reset", "POST"},
        {"PUT", "/control/configure", "POST"},
    };
    for (const auto& c : cases) {
        const Http_response response =
            send(target, {std::string(c.method), std::string(c.path), "Bearer s3cret", ""});
        EXPECT_EQ(response.status, 405) << c.method << " " << c.path;
        EXPECT_EQ(header(response, "Allow"), c.allow);
        EXPECT_TRUE(json_body(response).contains("error"));
    }
    EXPECT_TRUE(target.calls.empty());
}

// The error bodies the operator's client reads (builderapi.BuilderError),
// shared with its Go tests, each under the status it comes with.
TEST(ControlApi, GoldenErrorBodiesForTheOperator) {
    Recording_target target;
    test::expect_golden("error-409.json", command(target, "start").body);
    test::expect_golden("error-401.json", send(target, {"POST", "/control/start", "Bearer wrong", ""}).body);
    test::expect_golden("error-403.json",
                        send(target, {"POST", "/control/start", "Bearer s3cret", ""}, Control_token()).body);
    test::expect_golden("error-400.json", command(target, "configure", configure_body(0, 0)).body);
    test::expect_golden("error-404.json", command(target, "launch").body);
}

}  // namespace
}  // namespace eb
