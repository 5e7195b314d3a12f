#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace eb {

// `count` upper bounds start, start * factor, start * factor^2, ..., each
// rounded to 15 significant digits so labels read 1e-05, not 1.0000000000000001e-05.
std::vector<double> exponential_bounds(double start, double factor, std::size_t count);

// A copy of a histogram's buckets.
struct Histogram_snapshot {
    std::vector<double> bounds;         // ascending upper bounds, in seconds
    std::vector<std::uint64_t> counts;  // per bucket, not cumulative; the last (one past bounds) is above all of them
    double sum = 0;                     // of every observation
    std::uint64_t count = 0;            // of every observation: the sum of counts, so +Inf and _count agree
};

// Fixed buckets of durations for Prometheus. One thread observes; any thread
// may take snapshots. Relaxed atomics and no locks, so observing costs the
// data path a search of the bounds and two stores. A snapshot taken while
// observations go on may have a sum a few observations apart from its counts.
class Histogram {
public:
    // `bounds` ascending and finite; +Inf is implied.
    explicit Histogram(std::vector<double> bounds);

    // From the one writer thread only. Counts in the first bucket whose bound
    // is >= seconds (Prometheus's le); NaN is ignored.
    void observe(double seconds);

    Histogram_snapshot snapshot() const;

private:
    const std::vector<double> bounds_;
    std::vector<std::atomic<std::uint64_t>> counts_;  // bounds_.size() + 1
    std::atomic<double> sum_{0};
};

// Appends the snapshot in the text exposition format 0.0.4: # HELP and # TYPE
// histogram, cumulative name_bucket{le="..."} lines ending with le="+Inf",
// then name_sum and name_count. Bounds in their shortest round-trip form.
void append_prometheus_histogram(std::string& out, std::string_view name, std::string_view help,
                                 const Histogram_snapshot& snapshot);

}  // namespace eb
