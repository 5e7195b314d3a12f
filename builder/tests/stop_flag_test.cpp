#include "base/stop_flag.hpp"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include <gtest/gtest.h>

namespace eb {
namespace {

TEST(StopFlag, ASignalReachesTheFlagWhileItLives) {
    Stop_flag stop;
    stop_on_signals(stop);
    ::raise(SIGTERM);
    EXPECT_TRUE(stop.requested());
}

// The handler runs between any two instructions, also between a failed call
// and the read of its errno: it must leave errno as it found it, even when
// its own write fails.
TEST(StopFlag, TheSignalHandlerKeepsErrno) {
    Stop_flag stop;
    stop_on_signals(stop);
    const std::uint64_t almost_full = 0xfffffffffffffffe;  // the next write of 1 fails with EAGAIN
    ASSERT_EQ(::write(stop.fd(), &almost_full, sizeof almost_full), static_cast<ssize_t>(sizeof almost_full));
    errno = EDOM;
    ::raise(SIGTERM);
    EXPECT_EQ(errno, EDOM);
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
