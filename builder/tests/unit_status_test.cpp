#include "telemetry/unit_status.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace eb {
namespace {

// Returns once steady_clock has moved past its reading at the call, so a
// time measured across it must have grown (back-to-back readings may be equal).
void let_the_clock_tick() {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() == start) {
    }
}

// Rates over a whole run divide by the time spent building, not by the
// process's age: paused, connecting and idle spells do not count.
TEST(UnitStatus, BuildingTimeCountsOnlyBuildingSpells) {
    Unit_status status(0);
    EXPECT_EQ(status.snapshot().building_seconds, 0.0) << "idle from the start";

    status.set_activity("building");
    const double first = status.snapshot().building_seconds;
    let_the_clock_tick();
    EXPECT_GT(status.snapshot().building_seconds, first) << "grows while building";

    let_the_clock_tick();
    status.set_activity("paused");
    const double paused = status.snapshot().building_seconds;
    EXPECT_GT(paused, first);
    let_the_clock_tick();
    EXPECT_EQ(status.snapshot().building_seconds, paused) << "stands still while paused";

    status.set_activity("building");
    let_the_clock_tick();
    EXPECT_GT(status.snapshot().building_seconds, paused) << "a second spell adds to the first";
}

// The operator moves a BU whose output has taken nothing for long (its
// consumer gone): output_stalled_seconds is building time since the first
// MEP of an unbroken run of drops, and 0 once the output takes one.
TEST(UnitStatus, OutputStalledCountsBuildingTimeSinceTheOutputLastTookAMep) {
    Unit_status status(0);
    status.set_activity("building");
    status.add_discarded_mep(100);
    EXPECT_EQ(status.snapshot().meps_discarded, 1u);
    let_the_clock_tick();
    const double stalled = status.snapshot().output_stalled_seconds;
    EXPECT_GT(stalled, 0.0) << "grows while every MEP is dropped";
    status.add_discarded_mep(100);
    let_the_clock_tick();
    EXPECT_GT(status.snapshot().output_stalled_seconds, stalled) << "from the first drop of the run, not the last";

    status.set_activity("paused");
    const double paused = status.snapshot().output_stalled_seconds;
    let_the_clock_tick();
    EXPECT_EQ(status.snapshot().output_stalled_seconds, paused) << "a paused set drops nothing: it does not count";

    status.set_activity("building");
    status.add_mep(100, 0, 4096);
    EXPECT_EQ(status.snapshot().output_stalled_seconds, 0.0) << "the output took a MEP";
    status.add_discarded_mep(100);
    let_the_clock_tick();
    EXPECT_GT(status.snapshot().output_stalled_seconds, 0.0) << "a new run of drops counts again";
}

}  // namespace
}  // namespace eb
