#include "base/histogram.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace eb {
namespace {

static_assert(std::atomic<double>::is_always_lock_free, "observe() must not take a lock");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "observe() must not take a lock");

// Go's ParseFloat reads this back exactly: "1e-06", "0.001", "+Inf".
std::string prometheus_number(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    char text[32];
    const auto [end, error] = std::to_chars(text, text + sizeof text, value);
    return error == std::errc() ? std::string(text, end) : "NaN";
}

// HELP text escapes backslashes and newlines.
std::string escaped_help(std::string_view help) {
    std::string escaped;
    for (const char c : help) {
        if (c == '\\') escaped += "\\\\";
        else if (c == '\n') escaped += "\\n";
        else escaped += c;
    }
    return escaped;
}

}  // namespace

std::vector<double> exponential_bounds(double start, double factor, std::size_t count) {
    std::vector<double> bounds;
    for (std::size_t i = 0; i < count; ++i) {
        char text[32];
        std::snprintf(text, sizeof text, "%.15g", start * std::pow(factor, static_cast<double>(i)));
        bounds.push_back(std::strtod(text, nullptr));
    }
    return bounds;
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {
    // A caller's mistake in fixed code, not a condition to handle.
    for (std::size_t i = 0; i < bounds_.size(); ++i)
        if (!std::isfinite(bounds_[i]) || (i > 0 && !(bounds_[i - 1] < bounds_[i])))
            throw std::invalid_argument("histogram bounds must be finite and strictly ascending");
}

void Histogram::observe(double seconds) {
    if (std::isnan(seconds)) return;
    const auto bucket = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), seconds) -
                                                 bounds_.begin());
    // One writer: a load and a store suffice, no read-modify-write.
    auto& count = counts_[bucket];
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    sum_.store(sum_.load(std::memory_order_relaxed) + seconds, std::memory_order_relaxed);
}

Histogram_snapshot Histogram::snapshot() const {
    Histogram_snapshot snapshot;
    snapshot.bounds = bounds_;
    snapshot.sum = sum_.load(std::memory_order_relaxed);
    for (const auto& count : counts_) {
        snapshot.counts.push_back(count.load(std::memory_order_relaxed));
        snapshot.count += snapshot.counts.back();
    }
    return snapshot;
}

void append_prometheus_histogram(std::string& out, std::string_view name, std::string_view help,
                                 const Histogram_snapshot& snapshot) {
    out.append("# HELP ").append(name).append(" ").append(escaped_help(help)).append("\n");
    out.append("# TYPE ").append(name).append(" histogram\n");
    const auto bucket_line = [&](const std::string& le, std::uint64_t cumulative) {
        out.append(name).append("_bucket{le=\"").append(le).append("\"} ").append(std::to_string(cumulative));
        out.append("\n");
    };
    std::uint64_t cumulative = 0;
    for (std::size_t bucket = 0; bucket < snapshot.bounds.size(); ++bucket) {
        if (bucket < snapshot.counts.size()) cumulative += snapshot.counts[bucket];
        bucket_line(prometheus_number(snapshot.bounds[bucket]), cumulative);
    }
    bucket_line("+Inf", snapshot.count);  // everything, as Prometheus expects
    out.append(name).append("_sum ").append(prometheus_number(snapshot.sum)).append("\n");
    out.append(name).append("_count ").append(std::to_string(snapshot.count)).append("\n");
}

}  // namespace eb
