#include "stop_flag.hpp"

#include <poll.h>
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

TEST(StopFlag, ClearRearmsTheFlagAndItsDescriptor) {
    Stop_flag stop;
    stop.request();
    stop.clear();
    EXPECT_FALSE(stop.requested());
    pollfd watch{stop.fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&watch, 1, 0), 0) << "a cleared flag's descriptor must not wake pollers";
    EXPECT_FALSE(stop.wait_for(std::chrono::milliseconds(1)));
    stop.request();
    EXPECT_EQ(::poll(&watch, 1, 0), 1);
    EXPECT_TRUE(stop.wait_for(std::chrono::milliseconds(0)));
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
