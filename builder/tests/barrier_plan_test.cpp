#include "schedule/barrier_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <vector>

namespace eb {
namespace {

using Role = Barrier_role;

TEST(BarrierPlan, TournamentMatchesTheBracket) {
    struct Case {
        std::size_t position, participants;
        Role role;
    };
    const Case cases[] = {
        {0, 1, {std::nullopt, {}}},
        {0, 2, {std::nullopt, {1}}},
        {1, 2, {0, {}}},
        // Eight players: rounds of 1, 2, 4 (Fig. 7).
        {0, 8, {std::nullopt, {1, 2, 4}}},
        {1, 8, {0, {}}},
        {2, 8, {0, {3}}},
        {4, 8, {0, {5, 6}}},
        {6, 8, {4, {7}}},
        {7, 8, {6, {}}},
        // Uneven fields: byes where the opponent is missing.
        {0, 5, {std::nullopt, {1, 2, 4}}},
        {4, 5, {0, {}}},
        {2, 3, {0, {}}},
        {4, 6, {0, {5}}},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(testing::Message() << c.position << " of " << c.participants);
        EXPECT_EQ(barrier_role(Barrier_kind::tournament, c.position, c.participants), c.role);
    }
}

// The centralized barrier's master handles every token twice, one after
// another; the tournament's chains grow with log2 P: the tournament is
// shorter from P = 4 on, and far shorter at farm sizes.
TEST(BarrierPlan, CriticalPathsInMessages) {
    struct Case {
        std::size_t participants, centralized, tournament;
    };
    // Tournament, P = 4: the root holds both tokens at step 2, releases 1
    // at 3 and 2 at 4, which releases 3 at 5.
    const Case cases[] = {{1, 0, 0}, {2, 2, 2}, {4, 6, 5}, {8, 14, 9}, {16, 30, 14}, {512, 1022, 54}};
    for (const auto& c : cases) {
        SCOPED_TRACE(testing::Message() << c.participants << " participants");
        EXPECT_EQ(barrier_critical_path(Barrier_kind::centralized, c.participants), c.centralized);
        EXPECT_EQ(barrier_critical_path(Barrier_kind::tournament, c.participants), c.tournament);
        EXPECT_EQ(barrier_critical_path(Barrier_kind::none, c.participants), 0u);
    }
}

TEST(BarrierPlan, CentralizedIsAStarAroundPositionZero) {
    EXPECT_EQ(barrier_role(Barrier_kind::centralized, 0, 4), (Role{std::nullopt, {1, 2, 3}}));
    EXPECT_EQ(barrier_role(Barrier_kind::centralized, 3, 4), (Role{0, {}}));
    EXPECT_EQ(barrier_role(Barrier_kind::none, 3, 4), (Role{}));
}

// Every participant but the root has exactly one parent that lists it as a
// child, so arrivals reach the root from all and releases reach all; the
// tournament's depth is at most ceil(log2 P), exactly that for a power of two.
TEST(BarrierPlan, EveryKindFormsATreeOverAllParticipants) {
    for (const Barrier_kind kind : {Barrier_kind::centralized, Barrier_kind::tournament}) {
        for (std::size_t participants = 1; participants <= 70; ++participants) {
            SCOPED_TRACE(testing::Message() << barrier_name(kind) << " " << participants);
            std::size_t depth = 0;
            for (std::size_t p = 0; p < participants; ++p) {
                const Role role = barrier_role(kind, p, participants);
                EXPECT_EQ(role.parent.has_value(), p != 0);
                if (role.parent) {
                    const Role parent = barrier_role(kind, *role.parent, participants);
                    EXPECT_EQ(std::count(parent.children.begin(), parent.children.end(), p), 1);
                }
                for (const std::size_t child : role.children) {
                    EXPECT_LT(child, participants);
                    EXPECT_EQ(barrier_role(kind, child, participants).parent, p);
                }
                std::size_t hops = 0;
                for (std::optional<std::size_t> at = p; at && *at != 0; at = barrier_role(kind, *at, participants).parent)
                    ++hops;
                depth = std::max(depth, hops);
            }
            const std::size_t log2_ceil = participants <= 1 ? 0 : std::bit_width(participants - 1);
            if (kind == Barrier_kind::centralized) EXPECT_EQ(depth, participants > 1 ? 1u : 0u);
            else if (std::has_single_bit(participants)) EXPECT_EQ(depth, log2_ceil);
            else EXPECT_LE(depth, log2_ceil);
        }
    }
}

}  // namespace
}  // namespace eb
