#include "http.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

namespace eb {
namespace {

std::string_view reason(int status) {
    switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 409: return "Conflict";
        case 411: return "Length Required";
        case 413: return "Content Too Large";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 503: return "Service Unavailable";
    }
    return "Unknown";
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equal_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

std::string_view trimmed(std::string_view text) {
    const std::size_t first = text.find_first_not_of(" \t");
    if (first == std::string_view::npos) return {};
    return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// Header names are tokens: no spaces, separators or control characters.
bool valid_name(std::string_view name) {
    if (name.empty()) return false;
    for (const char c : name)
        if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f || std::string_view("\"(),/:;<=>?@[\\]{}").find(c) !=
                                                                     std::string_view::npos)
            return false;
    return true;
}

// Position just past the blank line that ends the head ("\r\n\r\n" or, from
// lenient clients, "\n\n"), or npos while it has not arrived.
std::size_t head_end(std::string_view received) {
    for (std::size_t at = received.find('\n'); at != std::string_view::npos; at = received.find('\n', at + 1)) {
        if (at + 1 < received.size() && received[at + 1] == '\n') return at + 2;
        if (at + 2 < received.size() && received[at + 1] == '\r' && received[at + 2] == '\n') return at + 3;
    }
    return std::string_view::npos;
}

Http_parse failed(int status, std::string_view message) {
    Http_parse parse;
    parse.kind = Http_parse::Kind::failed;
    parse.error = error_response(status, message);
    return parse;
}

}  // namespace

std::optional<std::string_view> Http_request::header(std::string_view name) const {
    for (const Http_header& header : headers)
        if (equal_ignoring_case(header.name, name)) return header.value;
    return std::nullopt;
}

std::optional<Http_request> parse_request_head(std::string_view head) {
    const auto next_line = [&head]() {
        const std::size_t end = std::min(head.find('\n'), head.size());
        std::string_view line = head.substr(0, end);
        head.remove_prefix(std::min(end + 1, head.size()));
        if (line.ends_with('\r')) line.remove_suffix(1);
        return line;
    };

    const std::string_view line = next_line();
    const std::size_t first_space = line.find(' ');
    if (first_space == std::string_view::npos || first_space == 0) return std::nullopt;
    const std::size_t second_space = line.find(' ', first_space + 1);
    if (second_space == std::string_view::npos || !line.substr(second_space + 1).starts_with("HTTP/"))
        return std::nullopt;
    const std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
    if (!target.starts_with('/')) return std::nullopt;
    Http_request request{line.substr(0, first_space), target.substr(0, target.find('?')), {}, {}};

    while (!head.empty()) {
        const std::string_view header = next_line();
        if (header.empty()) break;  // the blank line: the head ends
        const std::size_t colon = header.find(':');
        // A line without a name (obsolete folding starts with a space) is malformed.
        if (colon == std::string_view::npos || !valid_name(header.substr(0, colon))) return std::nullopt;
        request.headers.push_back({header.substr(0, colon), trimmed(header.substr(colon + 1))});
    }
    return request;
}

Http_parse parse_request(std::string_view received) {
    const std::size_t end = head_end(received);
    if (end == std::string_view::npos && received.size() < max_request_head) return {};
    if (end == std::string_view::npos || end > max_request_head)
        return failed(431, "request head over " + std::to_string(max_request_head) + " bytes; send fewer headers");
    auto request = parse_request_head(received.substr(0, end));
    if (!request)
        return failed(400, "malformed request: expected 'METHOD /path HTTP/1.1', then 'Name: value' headers");

    if (const auto encoding = request->header("Transfer-Encoding"))
        return failed(411, "Transfer-Encoding '" + std::string(*encoding) +
                               "' is not supported; send the body with a Content-Length (at most 4 MiB)");
    std::size_t length = 0;
    bool seen_length = false;
    for (const Http_header& header : request->headers) {
        if (!equal_ignoring_case(header.name, "Content-Length")) continue;
        std::uint64_t value = 0;
        const auto [at, error] = std::from_chars(header.value.data(), header.value.data() + header.value.size(), value);
        const bool digits_only = !header.value.empty() && at == header.value.data() + header.value.size();
        if (!digits_only || (error != std::errc{} && error != std::errc::result_out_of_range))
            return failed(400, "Content-Length '" + std::string(header.value) + "': expected a number of bytes");
        if (error == std::errc::result_out_of_range || value > max_request_body)
            return failed(413, "request body of " + std::string(header.value) + " bytes is over the limit of " +
                                   std::to_string(max_request_body) + " bytes (4 MiB)");
        if (seen_length && value != length)
            return failed(400, "two different Content-Length headers; send one");
        seen_length = true;
        length = static_cast<std::size_t>(value);
    }

    Http_parse parse;
    parse.head_complete = true;
    if (received.size() - end < length) {
        const auto expect = request->header("Expect");
        parse.expects_continue = expect && equal_ignoring_case(*expect, "100-continue");
        return parse;
    }
    parse.kind = Http_parse::Kind::complete;
    parse.request = std::move(*request);
    parse.request.body = received.substr(end, length);  // bytes after it (a pipelined request) are ignored
    return parse;
}

Http_response error_response(int status, std::string_view message) {
    const nlohmann::ordered_json body = {{"error", message}};
    // replace: a message quoting bytes from the request need not be UTF-8.
    return {status, "application/json",
            body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n",
            {}};
}

std::string serialize(const Http_response& response, bool head_only) {
    std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " + std::string(reason(response.status)) +
                      "\r\nContent-Type: " + response.content_type +
                      "\r\nContent-Length: " + std::to_string(response.body.size());
    for (const auto& [name, value] : response.headers) out += "\r\n" + name + ": " + value;
    out += "\r\nConnection: close\r\n\r\n";
    if (!head_only) out += response.body;
    return out;
}

}  // namespace eb
