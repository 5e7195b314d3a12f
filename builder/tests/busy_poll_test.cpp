#include "base/busy_poll.hpp"

#include <gtest/gtest.h>

namespace eb {
namespace {

// Whether it looks, and how often, not how long: no timed assertions.

TEST(BusyPoll, ReturnsAsSoonAsTheWaitedForIsReady) {
    const Busy_poll busy_poll(std::chrono::seconds(60));
    int looks = 0;
    EXPECT_TRUE(busy_poll.poll([&] { return ++looks == 3; }));
    EXPECT_EQ(looks, 3) << "no look after the one that found it ready";
}

TEST(BusyPoll, GivesUpWhenTheWindowIsOver) {
    const Busy_poll busy_poll(std::chrono::microseconds(200));
    int looks = 0;
    EXPECT_FALSE(busy_poll.poll([&] {
        ++looks;
        return false;
    }));
    EXPECT_GE(looks, 1);
}

TEST(BusyPoll, AZeroWindowSleepsAtOnce) {
    const Busy_poll busy_poll(std::chrono::microseconds(0));
    int looks = 0;
    EXPECT_FALSE(busy_poll.poll([&] { return ++looks != 0; }));
    EXPECT_EQ(looks, 0) << "the caller has looked already: no busy poll at all";
}

}  // namespace
}  // namespace eb
