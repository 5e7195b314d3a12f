#include "http.hpp"

#include "status_render.hpp"

namespace eb {
namespace {

std::string_view reason(int status) {
    switch (status) {
        case 200: return "OK";
        case 400: return "Bad Request";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
    }
    return "Unknown";
}

}  // namespace

std::optional<Http_request> parse_request_head(std::string_view head) {
    const std::string_view line = head.substr(0, head.find_first_of("\r\n"));
    const std::size_t first_space = line.find(' ');
    if (first_space == std::string_view::npos || first_space == 0) return std::nullopt;
    const std::size_t second_space = line.find(' ', first_space + 1);
    if (second_space == std::string_view::npos || !line.substr(second_space + 1).starts_with("HTTP/"))
        return std::nullopt;
    std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
    if (!target.starts_with('/')) return std::nullopt;
    return Http_request{line.substr(0, first_space), target.substr(0, target.find('?'))};
}

Http_response respond(const Http_request& request, const Status_snapshot& status) {
    const bool known_path = request.path == "/status" || request.path == "/metrics" || request.path == "/healthz";
    if (!known_path) return {404, "text/plain; charset=utf-8", "not found\n"};
    if (request.method != "GET" && request.method != "HEAD")
        return {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
    if (request.path == "/status") return {200, "application/json", status_json(status) + "\n"};
    if (request.path == "/metrics")
        return {200, "text/plain; version=0.0.4; charset=utf-8", prometheus_metrics(status)};
    return {200, "text/plain; charset=utf-8", "ok\n"};
}

Http_response bad_request() { return {400, "text/plain; charset=utf-8", "bad request\n"}; }

std::string serialize(const Http_response& response, bool head_only) {
    std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " + std::string(reason(response.status)) +
                      "\r\nContent-Type: " + std::string(response.content_type) +
                      "\r\nContent-Length: " + std::to_string(response.body.size()) +
                      (response.status == 405 ? "\r\nAllow: GET, HEAD" : "") + "\r\nConnection: close\r\n\r\n";
    if (!head_only) out += response.body;
    return out;
}

}  // namespace eb
