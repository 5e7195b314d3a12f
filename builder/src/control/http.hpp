#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace eb {

// What the control API's routing (control_api.hpp) sees of an HTTP request
// and answers; the wire is libmicrohttpd's (http_server.hpp).

// A request body may be this long (a configure carries the rank table: 65536
// ranks fit).
inline constexpr std::size_t max_request_body = 4 << 20;

struct Http_header {
    std::string_view name;  // as sent; compare with header()'s case-insensitive lookup
    std::string_view value;
};

// Views into the server's copy of the request, valid while it is answered.
struct Http_request {
    std::string_view method;
    std::string_view path;  // without the query string
    std::vector<Http_header> headers;
    std::string_view body;

    // The value of the first header called `name`, in any case.
    std::optional<std::string_view> header(std::string_view name) const;
};

struct Http_response {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;  // extra ones, e.g. Allow, WWW-Authenticate
};

// A JSON {"error": message} response.
Http_response error_response(int status, std::string_view message);

}  // namespace eb
