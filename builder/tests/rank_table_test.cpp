#include "rank_table.hpp"

#include <gtest/gtest.h>

namespace eb {
namespace {

TEST(RankTable, RolesByLayoutAndDummies) {
    struct Case {
        const char* name;
        Rank units;
        Layout layout;
        std::vector<Rank> dummies;
        std::vector<Rank> live, rus, bus;
    };
    const Case cases[] = {
        {"folded", 3, Layout::folded, {}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}},
        {"folded with dummies", 5, Layout::folded, {1, 4}, {0, 2, 3}, {0, 2, 3}, {0, 2, 3}},
        {"unfolded", 4, Layout::unfolded, {}, {0, 1, 2, 3}, {0, 2}, {1, 3}},
        {"unfolded with a dummy", 6, Layout::unfolded, {3}, {0, 1, 2, 4, 5}, {0, 2, 4}, {1, 5}},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const Rank_table table(c.units, c.layout, c.dummies);
        EXPECT_EQ(table.live_ranks(), c.live);
        EXPECT_EQ(table.rus(), c.rus);
        EXPECT_EQ(table.bus(), c.bus);
        for (std::size_t i = 0; i < c.bus.size(); ++i) EXPECT_EQ(table.bu_index(c.bus[i]), i);
        for (const Rank dummy : c.dummies) {
            EXPECT_FALSE(table.live(dummy));
            EXPECT_FALSE(table.runs_ru(dummy));
            EXPECT_FALSE(table.runs_bu(dummy));
        }
    }
}

}  // namespace
}  // namespace eb
