#include "base/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace eb {
namespace {

std::atomic<long> log_rank{-1};

std::string_view level_name(Log_level level) {
    switch (level) {
        case Log_level::info: return "INFO";
        case Log_level::warning: return "WARN";
        case Log_level::error: return "ERROR";
    }
    return "?";
}

// UTC with milliseconds, e.g. 2025-01-31T12:00:00.123Z.
std::string timestamp() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[32];
    const std::size_t length = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(text + length, sizeof text - length, ".%03dZ", static_cast<int>(millis));
    return text;
}

}  // namespace

void set_log_rank(Rank rank) { log_rank.store(rank); }

void write_log_line(Log_level level, std::string_view message) {
    const long rank = log_rank.load();
    std::string line = "[rank " + (rank < 0 ? std::string("?") : std::to_string(rank)) + "] ";
    line += timestamp();
    line += ' ';
    line += level_name(level);
    line += ' ';
    line += message;
    line += '\n';
    // Logging must not throw or retry forever; a short write to stderr is lost.
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace eb
