#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "unit_status.hpp"

namespace eb {

// The pure half of the status server: request parsing and routing, no sockets.

struct Http_request {
    std::string_view method;
    std::string_view path;  // without the query string
};

// Parses the request line of `head` (the bytes up to the blank line).
std::optional<Http_request> parse_request_head(std::string_view head);

struct Http_response {
    int status = 200;
    std::string_view content_type = "text/plain; charset=utf-8";
    std::string body;
};

// GET (or HEAD) /status, /metrics, /healthz; anything else is 404 or 405.
Http_response respond(const Http_request& request, const Status_snapshot& status);

Http_response bad_request();

// Status line, headers and, unless `head_only`, the body. Every response
// closes the connection: one request per connection keeps the server simple.
std::string serialize(const Http_response& response, bool head_only);

}  // namespace eb
