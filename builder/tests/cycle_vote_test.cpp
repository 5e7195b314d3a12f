#include "cycle_vote.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace eb {
namespace {

TEST(CycleVote, EveryUnitTakesTheSameDecisionFromTheVotes) {
    struct Row {
        const char* what;
        std::vector<Vote> votes;  // {pending_epoch, pause, stop, resumed}
        Cycle_decision expected;  // {switch_to, pause, stop, drop_resumes}
    };
    const Row rows[] = {
        {"nothing asked", {{1, false, false, false}, {1, false, false, false}}, {0, false, false, false}},
        {"one pause pauses the set", {{1, true, false, false}, {1, false, false, false}}, {0, true, false, false}},
        {"one stop stops the set", {{1, false, false, false}, {1, false, true, false}}, {0, false, true, false}},
        {"a table held by one unit only", {{2, false, false, false}, {1, false, false, false}}, {0, false, false, false}},
        {"the oldest newer table all hold", {{3, false, false, false}, {2, false, false, false}}, {2, false, false, false}},
        {"some units keep a resume", {{1, false, false, true}, {1, false, false, false}}, {0, false, false, false}},
        {"a resume kept against a pause", {{1, false, false, true}, {1, true, false, false}}, {0, true, false, false}},
        {"every unit keeps a resume", {{1, false, false, true}, {1, false, false, true}}, {0, false, false, true}},
        {"no votes", {}, {0, false, false, false}},
    };
    for (const Row& row : rows) EXPECT_EQ(decide(row.votes, 1), row.expected) << row.what;
}

}  // namespace
}  // namespace eb
