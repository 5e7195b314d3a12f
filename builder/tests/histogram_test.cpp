#include "base/histogram.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "test_support.hpp"

namespace eb {
namespace {

TEST(Histogram, ExponentialBoundsAreRoundNumbers) {
    EXPECT_EQ(exponential_bounds(1e-6, 10, 7), (std::vector<double>{1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1}));
    const std::vector<double> doubling = exponential_bounds(1e-6, 2, 21);
    ASSERT_EQ(doubling.size(), 21u);
    EXPECT_EQ(doubling[1], 2e-6);
    EXPECT_EQ(doubling.back(), 1.048576);
    EXPECT_TRUE(exponential_bounds(1, 2, 0).empty());
}

TEST(Histogram, CountsEachValueInTheFirstBucketAtOrAboveIt) {
    Histogram histogram({0.001, 0.01, 0.1});
    for (const double seconds : {0.0005, 0.001, 0.005, 0.5, std::nan("")}) histogram.observe(seconds);
    const Histogram_snapshot snapshot = histogram.snapshot();
    EXPECT_EQ(snapshot.bounds, (std::vector<double>{0.001, 0.01, 0.1}));
    EXPECT_EQ(snapshot.counts, (std::vector<std::uint64_t>{2, 1, 0, 1}));  // NaN ignored
    EXPECT_EQ(snapshot.count, 4u);
    EXPECT_DOUBLE_EQ(snapshot.sum, 0.5065);
}

TEST(Histogram, RejectsBoundsOutOfOrder) {
    EXPECT_THROW(Histogram({0.1, 0.01}), std::invalid_argument);
    EXPECT_THROW(Histogram({0.1, 0.1}), std::invalid_argument);
    EXPECT_THROW(Histogram({0.1, INFINITY}), std::invalid_argument);
}

TEST(Histogram, WritesCumulativeBucketsSumAndCount) {
    Histogram histogram(exponential_bounds(1e-6, 1000, 3));
    for (const double seconds : {5e-7, 2e-5, 3e-5, 2.5}) histogram.observe(seconds);
    std::string out;
    append_prometheus_histogram(out, "eb_wait_seconds", "Time waited.\\ With a\nnewline.", histogram.snapshot());
    EXPECT_EQ(out,
              "# HELP eb_wait_seconds Time waited.\\\\ With a\\nnewline.\n"
              "# TYPE eb_wait_seconds histogram\n"
              "eb_wait_seconds_bucket{le=\"1e-06\"} 1\n"
              "eb_wait_seconds_bucket{le=\"0.001\"} 3\n"
              "eb_wait_seconds_bucket{le=\"1\"} 3\n"
              "eb_wait_seconds_bucket{le=\"+Inf\"} 4\n"
              "eb_wait_seconds_sum 2.5000505\n"
              "eb_wait_seconds_count 4\n");
}

TEST(Histogram, AnEmptySnapshotStillHasTheInfBucket) {
    std::string out;
    append_prometheus_histogram(out, "eb_empty_seconds", "Nothing.", Histogram_snapshot{});
    EXPECT_EQ(out,
              "# HELP eb_empty_seconds Nothing.\n# TYPE eb_empty_seconds histogram\n"
              "eb_empty_seconds_bucket{le=\"+Inf\"} 0\neb_empty_seconds_sum 0\neb_empty_seconds_count 0\n");
}

// Snapshots taken while the writer observes never go back and end exact.
TEST(Histogram, ReadersSeeAWriterProgress) {
    Histogram histogram(exponential_bounds(1e-6, 2, 21));
    constexpr std::uint64_t observations = 200'000;
    std::thread writer([&] {
        for (std::uint64_t i = 0; i < observations; ++i) histogram.observe(static_cast<double>(i % 1000) * 1e-6);
    });
    std::uint64_t last = 0;
    while (last < observations) {
        const Histogram_snapshot snapshot = histogram.snapshot();
        ASSERT_GE(snapshot.count, last);
        ASSERT_LE(snapshot.count, observations);
        last = snapshot.count;
    }
    writer.join();
    const Histogram_snapshot done = histogram.snapshot();
    EXPECT_EQ(done.count, observations);
    EXPECT_NEAR(done.sum, 200 * 499.5 * 1e-3, 1e-6);
}

constexpr const char* promtool = "/usr/bin/promtool";

TEST(Histogram, PromtoolAcceptsTheText) {
    if (!std::filesystem::exists(promtool))
        EB_UNAVAILABLE("no " << promtool << " to check the text with: install Debian's prometheus package (make test does)");
    Histogram histogram(exponential_bounds(1e-6, 2, 21));
    for (int i = 0; i < 1000; ++i) histogram.observe(std::pow(1.02, i) * 1e-7);
    std::string text;
    append_prometheus_histogram(text, "eb_mep_build_seconds", "Time to build one MEP.", histogram.snapshot());
    append_prometheus_histogram(text, "eb_empty_seconds", "Nothing \\ yet.\nReally.", Histogram_snapshot{});

    const std::string log = test::make_temp_dir() + "/promtool.log";
    FILE* check = ::popen((std::string(promtool) + " check metrics >" + log + " 2>&1").c_str(), "w");
    ASSERT_NE(check, nullptr);
    std::fwrite(text.data(), 1, text.size(), check);
    const int status = ::pclose(check);
    std::ostringstream output;
    output << std::ifstream(log).rdbuf();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output.str() << "\nfor\n" << text;
}

}  // namespace
}  // namespace eb
