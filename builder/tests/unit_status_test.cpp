#include "unit_status.hpp"

#include <gtest/gtest.h>

namespace eb {
namespace {

// Rates over a whole run divide by the time spent building, not by the
// process's age: paused, connecting and idle spells do not count.
TEST(UnitStatus, BuildingTimeCountsOnlyBuildingSpells) {
    Unit_status status(0);
    EXPECT_EQ(status.snapshot().building_seconds, 0.0) << "idle from the start";

    status.set_activity("building");
    const double first = status.snapshot().building_seconds;
    EXPECT_GT(status.snapshot().building_seconds, first) << "grows while building";

    status.set_activity("paused");
    const double paused = status.snapshot().building_seconds;
    EXPECT_GT(paused, first);
    EXPECT_EQ(status.snapshot().building_seconds, paused) << "stands still while paused";

    status.set_activity("building");
    EXPECT_GT(status.snapshot().building_seconds, paused) << "a second spell adds to the first";
}

}  // namespace
}  // namespace eb
