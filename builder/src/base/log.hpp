#pragma once

#include <sstream>
#include <string_view>

#include "base/rank.hpp"

namespace eb {

enum class Log_level { info, warning, error };

// Every line carries the rank, so interleaved logs of many units stay legible.
void set_log_rank(Rank rank);

// Writes one line to stderr with a single write(), so lines from different
// threads never interleave.
void write_log_line(Log_level level, std::string_view message);

template <class... Parts>
void log(Log_level level, const Parts&... parts) {
    std::ostringstream message;
    (message << ... << parts);
    write_log_line(level, message.str());
}

template <class... Parts>
void log_info(const Parts&... parts) { log(Log_level::info, parts...); }

template <class... Parts>
void log_warning(const Parts&... parts) { log(Log_level::warning, parts...); }

template <class... Parts>
void log_error(const Parts&... parts) { log(Log_level::error, parts...); }

}  // namespace eb
