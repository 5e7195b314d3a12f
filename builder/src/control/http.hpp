#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace eb {

// The pure half of the HTTP server: request parsing and response writing, no
// sockets. Routing is control_api.hpp's.

// A request head may be this long, a body this long (a configure carries the
// rank table: 65536 ranks fit).
inline constexpr std::size_t max_request_head = 8192;
inline constexpr std::size_t max_request_body = 4 << 20;

struct Http_header {
    std::string_view name;  // as sent; compare with header()'s case-insensitive lookup
    std::string_view value; // surrounding spaces removed
};

// Views into the received bytes, which must outlive the request.
struct Http_request {
    std::string_view method;
    std::string_view path;  // without the query string
    std::vector<Http_header> headers;
    std::string_view body;

    // The value of the first header called `name`, in any case.
    std::optional<std::string_view> header(std::string_view name) const;
};

// Parses the request line and headers of `head` (the bytes up to and
// including the blank line, or without it). nullopt if malformed.
std::optional<Http_request> parse_request_head(std::string_view head);

struct Http_response {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;  // extra ones, e.g. Allow, WWW-Authenticate
};

// Where reading a request stands after the bytes received so far.
struct Http_parse {
    enum class Kind { incomplete, complete, failed };
    Kind kind = Kind::incomplete;
    bool head_complete = false;  // the body, if any, is what is still missing
    bool expects_continue = false;  // "Expect: 100-continue" with a body still to come
    Http_request request;        // complete: the request, its body included
    Http_response error;         // failed: the answer (400, 411, 413, 431)
};

// Reads one request from `received`: the head, then a body of Content-Length
// bytes (none without it; at most max_request_body, else 413). Chunked
// bodies are refused (411): the API's bodies are small and sent whole.
Http_parse parse_request(std::string_view received);

// A JSON {"error": message} response.
Http_response error_response(int status, std::string_view message);

// Status line, headers and, unless `head_only`, the body. Every response
// closes the connection: one request per connection keeps the server simple.
std::string serialize(const Http_response& response, bool head_only);

}  // namespace eb
