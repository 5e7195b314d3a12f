#pragma once

#include <optional>
#include <string>

#include "control/configure_request.hpp"
#include "control/control_state.hpp"
#include "control/control_token.hpp"
#include "control/http.hpp"
#include "base/rank.hpp"

namespace eb {

// What the unit made of a command.
struct Command_outcome {
    enum class Kind {
        done,     // 200 with the status
        refused,  // 409: not in this state, or an epoch that goes back (error says which)
        invalid,  // 400: the request itself is wrong
    };
    Kind kind = Kind::done;
    std::string error;
};

// The unit as the control API drives it. Implemented by the unit, which owns
// the state; called from the HTTP thread, so implementations synchronize.
class Control_target {
public:
    virtual ~Control_target() = default;
    // `configure` is non-null exactly for Command::configure.
    virtual Command_outcome command(Command command, const Configure_request* configure) = 0;
    virtual std::string status_json() const = 0;   // a JSON object, the body of GET /status
    virtual std::string metrics_text() const = 0;  // Prometheus text, the body of GET /metrics
    virtual Control_state state() const = 0;
    virtual std::optional<Rank> fixed_rank() const = 0;  // the process's --rank, if any
};

// Routes one request (docs/control-api.md): GET/HEAD /status, /metrics,
// /healthz, /readyz need no token; POST /control/<command> needs the bearer
// token. Error bodies are {"error": "..."}. Pure: no sockets.
Http_response handle_request(const Http_request& request, const Control_token& token, Control_target& target);

}  // namespace eb
