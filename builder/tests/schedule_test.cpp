#include "schedule/schedule.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <set>

namespace eb {
namespace {

struct Shift_case {
    Rank ru, phase, units, bu;
};

// Five units as in Fig. 3 of the reference design, plus the edges.
TEST(Schedule, SendTargetFollowsLinearShifting) {
    const Shift_case cases[] = {
        {0, 0, 1, 0},  // a single unit only ever sends to itself
        {0, 0, 5, 0}, {1, 0, 5, 1}, {4, 0, 5, 4},  // phase 0: everyone to itself
        {0, 1, 5, 1}, {3, 1, 5, 4}, {4, 1, 5, 0},  // wraps around
        {2, 3, 5, 0}, {4, 4, 5, 3}, {1, 2, 4, 3}, {3, 3, 4, 2},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(testing::Message() << "RU " << c.ru << " phase " << c.phase << " of " << c.units);
        EXPECT_EQ(send_target(c.ru, c.phase, c.units), c.bu);
        EXPECT_EQ(receive_source(c.bu, c.phase, c.units), c.ru);
    }
}

TEST(Schedule, EveryPhasePairsEachRuWithADistinctBu) {
    for (Rank units = 1; units <= 9; ++units) {
        for (Rank phase = 0; phase < units; ++phase) {
            std::set<Rank> targets;
            for (Rank ru = 0; ru < units; ++ru) {
                const Rank bu = send_target(ru, phase, units);
                targets.insert(bu);
                EXPECT_EQ(receive_source(bu, phase, units), ru);
                EXPECT_EQ(receive_phase(bu, ru, units), phase);
            }
            EXPECT_EQ(targets.size(), units) << "phase " << phase << " of " << units;
        }
    }
}

TEST(Schedule, EachCycleSendsEveryChunkToItsBuilderOnce) {
    for (Rank units = 1; units <= 9; ++units) {
        for (Rank ru = 0; ru < units; ++ru) {
            std::set<std::uint64_t> chunks;
            for (Rank phase = 0; phase < units; ++phase) {
                const Rank bu = send_target(ru, phase, units);
                const std::uint64_t chunk = chunk_for(7, bu, units);
                EXPECT_EQ(chunk % units, bu) << "chunk c is built on BU c mod N";
                chunks.insert(chunk);
            }
            EXPECT_EQ(chunks.size(), units);
            EXPECT_EQ(*chunks.begin(), 7u * units);
            EXPECT_EQ(*chunks.rbegin(), 7u * units + units - 1);
        }
    }
}

TEST(Schedule, CyclesForEventsRoundsUpToWholeMeps) {
    struct Case {
        std::uint64_t events;
        std::uint32_t packing_factor;
        std::uint64_t cycles;
    };
    const Case cases[] = {
        {0, 1000, 0},  // no limit
        {1, 1000, 1},
        {999, 1000, 1},
        {1000, 1000, 1},
        {1001, 1000, 2},
        {2500, 1000, 3},
        {std::numeric_limits<std::uint64_t>::max(), 1, std::numeric_limits<std::uint64_t>::max()},
        {std::numeric_limits<std::uint64_t>::max(), 2, std::uint64_t{1} << 63},
    };
    for (const auto& c : cases)
        EXPECT_EQ(cycles_for_events(c.events, c.packing_factor), c.cycles) << c.events << " / " << c.packing_factor;
}

}  // namespace
}  // namespace eb
