#pragma once

#include <string>
#include <string_view>

namespace eb {

// `text` as a JSON string literal, quotes included: quotes, backslashes and
// control characters escaped; other bytes (UTF-8 included) pass through.
std::string json_string(std::string_view text);

}  // namespace eb
