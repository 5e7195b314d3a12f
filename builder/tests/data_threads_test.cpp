#include "base/data_threads.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace eb {
namespace {

using namespace std::chrono_literals;

TEST(DataThreads, EveryPartRunsOnceOnItsOwnThreadAndRunReturnsWhenAllHave) {
    Data_threads threads(4, Busy_poll(50us));
    ASSERT_EQ(threads.size(), 4u);
    std::vector<int> runs(4, 0);
    std::vector<std::thread::id> ran_on(4);
    threads.run(4, [&](unsigned part) {
        std::this_thread::sleep_for(part * 5ms);  // the caller's part ends first: run must wait for the rest
        ++runs[part];
        ran_on[part] = std::this_thread::get_id();
    });
    EXPECT_EQ(runs, std::vector<int>(4, 1));
    EXPECT_EQ(ran_on[0], std::this_thread::get_id()) << "part 0 runs on the calling thread";
    for (unsigned part = 1; part < 4; ++part)
        for (unsigned other = 0; other < part; ++other) EXPECT_NE(ran_on[part], ran_on[other]);
}

// Jobs of fewer parts than threads, back to back, with the workers either
// looking for work (busy poll) or asleep: no part runs twice or is lost.
TEST(DataThreads, ManyJobsOfVaryingPartsEachRunExactlyOnce) {
    for (const auto idle_poll : {0us, 200us}) {
        Data_threads threads(4, Busy_poll(idle_poll));
        std::vector<std::atomic<int>> runs(4);
        int expected[4] = {};
        for (unsigned job = 0; job < 3000; ++job) {
            const unsigned parts = 1 + job % 4;
            threads.run(parts, [&](unsigned part) { runs[part].fetch_add(1, std::memory_order_relaxed); });
            for (unsigned part = 0; part < parts; ++part) ++expected[part];
        }
        for (unsigned part = 0; part < 4; ++part) EXPECT_EQ(runs[part].load(), expected[part]) << "part " << part;
    }
}

TEST(DataThreads, AnExceptionOfAWorkersPartReachesTheCallerOnceAllAreDone) {
    Data_threads threads(3, Busy_poll(0us));
    std::atomic<int> finished{0};
    EXPECT_THROW(threads.run(3,
                             [&](unsigned part) {
                                 if (part == 2) throw std::runtime_error("part 2 failed");
                                 std::this_thread::sleep_for(10ms);
                                 ++finished;
                             }),
                 std::runtime_error);
    EXPECT_EQ(finished.load(), 2) << "the other parts ran to their end first";
    // The pool goes on working after a failed job.
    std::atomic<int> runs{0};
    threads.run(3, [&](unsigned) { ++runs; });
    EXPECT_EQ(runs.load(), 3);
}

TEST(DataThreads, RefusesMorePartsThanThreadsAndZeroOrTooManyThreads) {
    Data_threads threads(2, Busy_poll(0us));
    EXPECT_THROW(threads.run(3, [](unsigned) {}), std::logic_error);
    EXPECT_THROW(Data_threads(0, Busy_poll(0us)), std::invalid_argument);
    EXPECT_THROW(Data_threads(Data_threads::max_threads + 1, Busy_poll(0us)), std::invalid_argument);
}

}  // namespace
}  // namespace eb
