#include "control/control_api.hpp"

#include <nlohmann/json.hpp>
#include <variant>

namespace eb {
namespace {

// Keys in the order written, as in the documented examples.
using Json = nlohmann::ordered_json;

constexpr std::string_view command_prefix = "/control/";

std::string dumped(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n"; }

Json command_names(const std::vector<Command>& commands) {
    Json names = Json::array();
    for (const Command command : commands) names.push_back(command_name(command));
    return names;
}

Http_response method_not_allowed(std::string_view path, std::string_view allowed) {
    Http_response response =
        error_response(405, std::string(path) + " takes " + std::string(allowed == "POST" ? "POST" : "GET and HEAD") +
                                " only");
    response.headers.emplace_back("Allow", allowed);
    return response;
}

Http_response unauthorized(std::string_view message) {
    Http_response response = error_response(401, message);
    response.headers.emplace_back("WWW-Authenticate", "Bearer");
    return response;
}

Http_response read(std::string_view path, const Control_target& target) {
    if (path == "/status") return {200, "application/json", target.status_json() + "\n", {}};
    if (path == "/metrics") return {200, "text/plain; version=0.0.4; charset=utf-8", target.metrics_text(), {}};
    if (path == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n", {}};
    // /readyz: ready once configured, as long as no failure holds the unit.
    const Control_state state = target.state();
    if (state == Control_state::ready || state == Control_state::running || state == Control_state::paused)
        return {200, "text/plain; charset=utf-8", "ready\n", {}};
    const std::string name(control_state_name(state));
    return {503, "application/json", dumped({{"error", "not ready: state " + name}, {"state", name}}), {}};
}

Http_response run_command(const Http_request& request, const Control_token& token, Control_target& target) {
    if (!token.configured())
        return error_response(403,
                              "the control API is disabled: start eb-builder with --token-file or EB_CONTROL_TOKEN");
    const auto authorization = request.header("Authorization");
    const auto presented = authorization ? bearer_token(*authorization) : std::nullopt;
    if (!presented) return unauthorized("missing Authorization: Bearer <token>");
    if (!token.matches(*presented)) return unauthorized("wrong bearer token");

    const std::string_view name = request.path.substr(command_prefix.size());
    const auto command = parse_command(name);
    if (!command)
        return error_response(404, "unknown command '" + std::string(name) + "'; expected one of " +
                                       command_list({std::begin(all_commands), std::end(all_commands)}));

    std::optional<Configure_request> configure;
    if (*command == Command::configure) {
        auto parsed = parse_configure_request(request.body, target.fixed_rank());
        if (auto* error = std::get_if<std::string>(&parsed)) return error_response(400, *error);
        configure = std::move(std::get<Configure_request>(parsed));
    } else if (!request.body.empty()) {
        return error_response(400, std::string(name) + " takes no body; send an empty POST");
    }

    const Command_outcome outcome = target.command(*command, configure ? &*configure : nullptr);
    switch (outcome.kind) {
        case Command_outcome::Kind::done:
            return {200, "application/json", target.status_json() + "\n", {}};
        case Command_outcome::Kind::refused: {
            const Control_state state = target.state();
            return {409, "application/json",
                    dumped({{"error", outcome.error},
                            {"state", control_state_name(state)},
                            {"allowed", command_names(allowed_commands(state))}}),
                    {}};
        }
        case Command_outcome::Kind::invalid:
            break;
    }
    return error_response(400, outcome.error);
}

}  // namespace

Http_response handle_request(const Http_request& request, const Control_token& token, Control_target& target) {
    const std::string_view path = request.path;
    if (path == "/status" || path == "/metrics" || path == "/healthz" || path == "/readyz") {
        if (request.method != "GET" && request.method != "HEAD") return method_not_allowed(path, "GET, HEAD");
        return read(path, target);
    }
    if (path.starts_with(command_prefix)) {
        if (request.method != "POST") return method_not_allowed(path, "POST");
        return run_command(request, token, target);
    }
    return error_response(404, "no such path: " + std::string(path) +
                                   "; expected /status, /metrics, /healthz, /readyz or POST /control/<command>");
}

}  // namespace eb
