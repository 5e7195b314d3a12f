#include "formats/event_model.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace eb {
namespace {

TEST(EventModel, FixedSizesAreFixed) {
    const Fragment_sizes size_of({Size_model::fixed, 160}, 4);
    for (std::uint64_t event = 0; event < 100; ++event) EXPECT_EQ(size_of(event), 160);
}

TEST(EventModel, GroupsCarryTheirShareOfTheEvent) {
    const Event_model model{Size_model::poisson, 133};
    const double expected[] = {0.28 * 3 * 133, 0.33 * 3 * 133, 0.39 * 3 * 133};
    double event_size = 0;
    for (std::uint32_t source = 0; source < 3; ++source) {
        EXPECT_NEAR(mean_fragment_size(model, source), expected[source], 1e-9);
        event_size += mean_fragment_size(model, source);
    }
    EXPECT_NEAR(event_size / 3, 133, 1e-9) << "mean fragment over the sources";
    EXPECT_EQ(detector_group(4), 1u);
    EXPECT_EQ(fragment_type(4), 2);
}

TEST(EventModel, PoissonSizesHaveThePoissonMeanAndVariance) {
    const Event_model model{Size_model::poisson, 133};
    for (std::uint32_t source = 0; source < 3; ++source) {
        const Fragment_sizes size_of(model, source);
        double sum = 0, squares = 0;
        constexpr int samples = 200000;
        for (std::uint64_t event = 0; event < samples; ++event) {
            const double size = size_of(event);
            sum += size;
            squares += size * size;
        }
        const double mean = sum / samples, variance = squares / samples - mean * mean;
        const double expected = mean_fragment_size(model, source);
        EXPECT_NEAR(mean, expected, 0.2) << "source " << source;
        EXPECT_NEAR(variance, expected, expected * 0.03) << "source " << source;
    }
}

TEST(EventModel, SizesArePureFunctionsOfSourceAndEvent) {
    const Event_model model{Size_model::poisson, 133};
    const Fragment_sizes a(model, 7), b(model, 7), other(model, 10);
    int differing = 0;
    for (std::uint64_t event = 0; event < 1000; ++event) {
        EXPECT_EQ(a(event), b(event));
        differing += a(event) != other(event);
    }
    EXPECT_GT(differing, 900) << "sources of one group draw independently";
}

}  // namespace
}  // namespace eb
