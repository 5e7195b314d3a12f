#include "schedule/cycle_membership.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace eb {
namespace {

// A list naming `ranks`, in a set of `units`.
std::optional<Membership> naming(Rank units, std::vector<Rank> ranks) {
    Membership list(units, 0);
    for (const Rank rank : ranks) list[rank] = 1;
    return list;
}
constexpr std::nullopt_t not_heard = std::nullopt;

std::vector<Rank> ranks_out(const Membership_proposal& proposal) {
    std::vector<Rank> out;
    for (Rank rank = 0; rank < proposal.out.size(); ++rank)
        if (proposal.out[rank]) out.push_back(rank);
    return out;
}

TEST(ProposeMembership, ActsOnItsOwnLossesAtOnceAndOnOthersOnlyOnceReportedTwice) {
    struct Case {
        std::string name;
        Rank self;
        std::vector<Rank> live;
        std::vector<std::optional<Membership>> lost_lists;
        Broken_links before;
        std::vector<Rank> out;
        Broken_links reported;
    };
    const std::vector<Case> cases = {
        {"nobody lost anyone", 1, {0, 1, 2}, {naming(3, {}), naming(3, {}), naming(3, {})}, {}, {}, {}},
        {"a dead unit this unit lost: out at once", 0, {0, 1, 2}, {naming(3, {2}), naming(3, {}), not_heard}, {},
         {2}, {{0, 2}}},
        {"a dead unit everyone lost", 0, {0, 1, 2, 3}, {naming(4, {3}), naming(4, {3}), naming(4, {3}), not_heard},
         {}, {3}, {{0, 3}, {1, 3}, {2, 3}}},
        {"another's first report: a cycle for the other side to tell", 0, {0, 1, 2, 3},
         {naming(4, {}), naming(4, {}), naming(4, {}), naming(4, {2})}, {}, {}, {{2, 3}}},
        {"a unit cut off that saw its loss first is not believed over the set", 0, {0, 1, 2, 3},
         {naming(4, {3}), naming(4, {3}), naming(4, {3}), not_heard}, {{2, 3}}, {3}, {{0, 3}, {1, 3}, {2, 3}}},
        {"a link two others reported twice: the higher rank goes", 0, {0, 1, 2, 3},
         {naming(4, {}), naming(4, {3}), naming(4, {}), naming(4, {1})}, {{1, 3}}, {3}, {{1, 3}}},
        {"the rank on most broken links goes first, the rest stay", 0, {0, 1, 2, 3},
         {naming(4, {}), naming(4, {2}), naming(4, {1, 3}), naming(4, {2})}, {{1, 2}, {2, 3}}, {2},
         {{1, 2}, {2, 3}}},
        {"the unit cut off, seen from itself: it puts itself out", 3, {0, 1, 2, 3},
         {not_heard, not_heard, not_heard, naming(4, {0, 1, 2})}, {}, {3}, {{0, 3}, {1, 3}, {2, 3}}},
        {"two units that lost each other: each keeps itself", 1, {0, 1}, {not_heard, naming(2, {0})}, {}, {0},
         {{0, 1}}},
        {"two units lost at once (a server of two) by one that hears the rest: both out, it stays", 0,
         {0, 1, 2, 3, 4, 5}, {naming(6, {4, 5}), naming(6, {}), naming(6, {}), naming(6, {}), not_heard, not_heard},
         {}, {4, 5}, {{0, 4}, {0, 5}}},
        {"half the set lost, by the half with the lowest rank: the other half out", 1, {0, 1, 2, 3},
         {naming(4, {}), naming(4, {2, 3}), not_heard, not_heard}, {}, {2, 3}, {{1, 2}, {1, 3}}},
        {"half the set lost, by the half without the lowest rank: it puts itself out", 2, {0, 1, 2, 3},
         {not_heard, not_heard, naming(4, {0, 1}), naming(4, {})}, {}, {2}, {{0, 2}, {1, 2}}},
        {"dummies and ranks beyond the table break no link", 0, {0, 2},
         {naming(4, {1, 3}), not_heard, naming(4, {}), not_heard}, {}, {}, {}},
    };
    for (const Case& test : cases) {
        SCOPED_TRACE(test.name);
        const Membership_proposal proposal = propose_membership(test.self, test.live, test.lost_lists, test.before);
        EXPECT_EQ(ranks_out(proposal), test.out);
        EXPECT_EQ(proposal.reported, test.reported);
    }
}

TEST(HearsAQuorum, IsMoreThanHalfTheLiveRanksOrHalfWithTheLowest) {
    const std::vector<Rank> four = {0, 1, 2, 3}, two = {0, 1}, with_dummy = {0, 2, 3};
    EXPECT_TRUE(hears_a_quorum(0, four, *naming(4, {})));
    EXPECT_TRUE(hears_a_quorum(3, four, *naming(4, {2})));
    EXPECT_TRUE(hears_a_quorum(1, four, *naming(4, {2, 3}))) << "half, with rank 0";
    EXPECT_FALSE(hears_a_quorum(2, four, *naming(4, {0, 1}))) << "half, without rank 0";
    EXPECT_FALSE(hears_a_quorum(3, four, *naming(4, {0, 1, 2}))) << "alone";
    EXPECT_TRUE(hears_a_quorum(0, two, *naming(2, {1}))) << "of two, the lower";
    EXPECT_FALSE(hears_a_quorum(1, two, *naming(2, {0})));
    EXPECT_TRUE(hears_a_quorum(2, with_dummy, *naming(4, {0}))) << "two of three live: a dummy counts for nothing";
    EXPECT_FALSE(hears_a_quorum(0, with_dummy, *naming(4, {2, 3})));
}

TEST(LeadingProposer, IsTheLowestRankHeardWhoseProposalKeepsIt) {
    const std::vector<Rank> live = {0, 1, 2, 3};
    using Outs = std::vector<std::optional<Membership>>;
    EXPECT_EQ(leading_proposer(live, Outs{naming(4, {3}), naming(4, {}), naming(4, {}), not_heard}), (Leader{0, false}));
    EXPECT_EQ(leading_proposer(live, Outs{not_heard, naming(4, {0}), naming(4, {0}), naming(4, {0})}),
              (Leader{1, false}))
        << "rank 0 not heard, and put out by rank 1 too";
    EXPECT_EQ(leading_proposer(live, Outs{naming(4, {0}), naming(4, {}), not_heard, not_heard}), (Leader{1, false}))
        << "rank 0 puts itself out";
    EXPECT_EQ(leading_proposer(live, Outs{not_heard, naming(4, {}), not_heard, naming(4, {})}), (Leader{1, true}))
        << "rank 1 keeps rank 0, which this unit did not hear: the others follow rank 0";
    EXPECT_EQ(leading_proposer(live, Outs{not_heard, not_heard, not_heard, naming(4, {0, 1, 2, 3})}), (Leader{}))
        << "alone, and out by its own count";
}

TEST(FollowProposals, SitsACycleOutWhereItCannotKnowTheSetsDecisionAndNeverPutsItselfOutForIt) {
    struct Case {
        std::string name;
        Rank self;
        std::vector<std::optional<Membership>> outs;  // by rank: proposals heard
        Following expected;
    };
    const std::vector<Rank> live = {0, 1, 2, 3};
    const auto none = naming(4, {});
    const std::vector<Case> cases = {
        {"everyone heard: rank 0 leads", 0, {none, none, none, none}, {0, false, false, true, true}},
        {"everyone heard: rank 2 follows rank 0", 2, {none, none, none, none}, {0, false, false, false, false}},
        {"rank 0 lost during the data: every proposal puts it out, rank 1 leads", 1,
         {not_heard, naming(4, {0}), naming(4, {0}), naming(4, {0})}, {1, false, false, true, true}},
        {"rank 0 stopped in the proposal round: proposals made before keep it; rank 1 sits out", 1,
         {not_heard, none, none, none}, {1, false, true, false, false}},
        {"... and so does rank 3", 3, {not_heard, none, none, none}, {1, false, true, false, false}},
        {"rank 3 lost rank 0 just before proposing, the others just after: cut from rank 0, it sits out", 3,
         {not_heard, none, none, naming(4, {0})}, {1, false, true, false, false}},
        {"rank 0 woken, lost every peer since its proposal: it sits out and leads nobody", 0,
         {none, not_heard, not_heard, not_heard}, {0, false, true, true, false}},
        {"rank 0 woken, lost rank 1 before proposing, 2 and 3 since", 0,
         {naming(4, {1}), not_heard, not_heard, not_heard}, {0, false, true, true, false}},
        {"rank 1 lost rank 3 before proposing: its report the set acts on in time", 1,
         {none, naming(4, {3}), none, not_heard}, {0, false, false, false, false}},
        {"put out by the proposal it follows", 3, {naming(4, {3}), none, none, naming(4, {0})},
         {0, true, false, false, false}},
        {"alone: its own proposal puts it out", 3, {not_heard, not_heard, not_heard, naming(4, {0, 1, 2, 3})},
         {3, true, false, false, false}},
    };
    for (const Case& c : cases) EXPECT_EQ(follow_proposals(c.self, live, c.outs), c.expected) << c.name;
}

}  // namespace
}  // namespace eb
