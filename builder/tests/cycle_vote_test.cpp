#include "schedule/cycle_vote.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace eb {
namespace {

TEST(CycleVote, EveryUnitTakesTheSameDecisionFromTheVotes) {
    struct Row {
        const char* what;
        std::vector<Vote> votes;  // {pending_epoch, pause, stop}
        Cycle_decision expected;  // {switch_to, pause, stop}
    };
    const Row rows[] = {
        {"nothing asked", {{1, false, false}, {1, false, false}}, {0, false, false}},
        {"one pause pauses the set", {{1, true, false}, {1, false, false}}, {0, true, false}},
        {"one stop stops the set", {{1, false, false}, {1, false, true}}, {0, false, true}},
        {"a table held by one unit only", {{2, false, false}, {1, false, false}}, {0, false, false}},
        {"the oldest newer table all hold", {{3, false, false}, {2, false, false}}, {2, false, false}},
        {"no votes", {}, {0, false, false}},
    };
    for (const Row& row : rows) EXPECT_EQ(decide(row.votes, 1), row.expected) << row.what;
}

}  // namespace
}  // namespace eb
