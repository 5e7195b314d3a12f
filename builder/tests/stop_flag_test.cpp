#include "stop_flag.hpp"

#include <signal.h>

#include <gtest/gtest.h>

namespace eb {
namespace {

TEST(StopFlag, ASignalReachesTheFlagWhileItLives) {
    Stop_flag stop;
    stop_on_signals(stop);
    ::raise(SIGTERM);
    EXPECT_TRUE(stop.requested());
}

// Once the flag is gone, the handler must not touch it: the signal gets its
// default action again.
TEST(StopFlagDeathTest, ASignalAfterTheFlagIsGoneTakesTheDefaultAction) {
    EXPECT_EXIT(
        {
            {
                Stop_flag stop;
                stop_on_signals(stop);
            }
            ::raise(SIGTERM);
            std::exit(0);
        },
        testing::KilledBySignal(SIGTERM), "");
}

}  // namespace
}  // namespace eb
