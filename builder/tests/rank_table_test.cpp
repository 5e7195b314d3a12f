#include "schedule/rank_table.hpp"

#include <gtest/gtest.h>

namespace eb {
namespace {

constexpr auto D = Rank_function::dummy;
constexpr auto RU = Rank_function::ru;
constexpr auto BU = Rank_function::bu;
constexpr auto RB = Rank_function::ru_bu;

TEST(RankTable, RolesFollowEachRanksFunction) {
    struct Case {
        const char* name;
        std::vector<Rank_function> functions;
        std::vector<Rank> live, rus, bus;
    };
    const Case cases[] = {
        {"folded", {RB, RB, RB}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}},
        {"folded with dummies", {RB, D, RB, RB, D}, {0, 2, 3}, {0, 2, 3}, {0, 2, 3}},
        {"unfolded, interleaved", {RU, BU, RU, BU}, {0, 1, 2, 3}, {0, 2}, {1, 3}},
        {"unfolded, RUs then BUs", {RU, RU, BU, BU}, {0, 1, 2, 3}, {0, 1}, {2, 3}},
        {"unfolded, BUs first, a dummy between", {BU, D, BU, RU, RU, RU}, {0, 2, 3, 4, 5}, {3, 4, 5}, {0, 2}},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const Rank_table table(c.functions);
        EXPECT_EQ(table.units(), c.functions.size());
        EXPECT_EQ(table.live_ranks(), c.live);
        EXPECT_EQ(table.rus(), c.rus);
        EXPECT_EQ(table.bus(), c.bus);
        for (std::size_t i = 0; i < c.bus.size(); ++i) EXPECT_EQ(table.bu_index(c.bus[i]), i);
        for (Rank rank = 0; rank < table.units(); ++rank) {
            EXPECT_EQ(table.function(rank), c.functions[rank]);
            if (c.functions[rank] == D) {
                EXPECT_FALSE(table.live(rank) || table.runs_ru(rank) || table.runs_bu(rank)) << rank;
            }
        }
    }
}

// An unread source keeps its slot in every MEP: sources() are the RUs and
// the unread ones, in rank order.
TEST(RankTable, SourcesAreTheRusAndTheUnreadOnes) {
    const Rank_table table({RB, BU, D, RU, BU, RB}, {4, 1});
    EXPECT_EQ(table.rus(), (std::vector<Rank>{0, 3, 5}));
    EXPECT_EQ(table.sources(), (std::vector<Rank>{0, 1, 3, 4, 5}));
    EXPECT_TRUE(table.source_unread(1) && table.source_unread(4));
    EXPECT_FALSE(table.source_unread(0) || table.source_unread(3));
    EXPECT_EQ(table.source_slot(3), 2u);
    EXPECT_EQ(Rank_table({RB, BU}).sources(), (std::vector<Rank>{0})) << "a BU alone is no source unless unread";
    EXPECT_THROW(Rank_table({RB, D}, {1}), std::invalid_argument) << "a dummy";
    EXPECT_THROW(Rank_table({RB, RU}, {1}), std::invalid_argument) << "a rank reading its source";
}

// Only a self-configured set (--layout, --dummies) places RUs and BUs by parity.
TEST(RankTable, FlagFunctionsByLayoutAndDummies) {
    struct Case {
        const char* name;
        Rank units;
        Layout layout;
        std::vector<Rank> dummies;
        std::vector<Rank_function> functions;
    };
    const Case cases[] = {
        {"folded", 3, Layout::folded, {}, {RB, RB, RB}},
        {"folded with dummies", 5, Layout::folded, {1, 4}, {RB, D, RB, RB, D}},
        {"unfolded: even ranks RU, odd BU", 4, Layout::unfolded, {}, {RU, BU, RU, BU}},
        {"unfolded with a dummy", 6, Layout::unfolded, {3}, {RU, BU, RU, D, RU, BU}},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        EXPECT_EQ(flag_functions(c.units, c.layout, c.dummies), c.functions);
    }
}

}  // namespace
}  // namespace eb
