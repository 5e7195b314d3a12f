#include "control/http.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace eb {
namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equal_ignoring_case(std::string_view a, std::string_view b) {
    return std::ranges::equal(a, b, [](char x, char y) { return lower(x) == lower(y); });
}

}  // namespace

std::optional<std::string_view> Http_request::header(std::string_view name) const {
    for (const Http_header& header : headers)
        if (equal_ignoring_case(header.name, name)) return header.value;
    return std::nullopt;
}

Http_response error_response(int status, std::string_view message) {
    const nlohmann::ordered_json body = {{"error", message}};
    // replace: a message quoting bytes from the request need not be UTF-8.
    return {status, "application/json",
            body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n",
            {}};
}

}  // namespace eb
