#include "event_builder.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <thread>

#include "checking_writer.hpp"
#include "generator_reader.hpp"
#include "local_mesh.hpp"
#include "tcp_transport.hpp"

namespace eb {
namespace {

constexpr std::uint32_t packing_factor = 50;
constexpr std::uint32_t fragment_size = 40;

Mep_checker checker_for(Rank units) {
    std::vector<std::uint32_t> sources(units);
    std::iota(sources.begin(), sources.end(), 0u);
    return Mep_checker(sources, packing_factor);
}

// One unit's RU + BU around `transport`, counting into `status`.
bool run_unit(Transport& transport, Unit_status& status, std::uint64_t cycles,
              std::uint32_t unit_packing_factor = packing_factor) {
    Generator_reader source(transport.rank(), unit_packing_factor, fragment_size, transport.units());
    Checking_writer output(checker_for(transport.units()), status);
    Event_builder builder({unit_packing_factor, cycles}, transport, source, output);
    return builder.run();
}

// Flips a payload byte of the first fragment of every MFP received: a
// transport bug that only the consumer's checks can catch.
class Corrupting_transport final : public Transport {
public:
    explicit Corrupting_transport(Transport& inner) : inner_(inner) {}
    Rank rank() const override { return inner_.rank(); }
    Rank units() const override { return inner_.units(); }
    bool transfer(std::span<const Send> sends, std::span<const Receive> receives) override {
        const bool done = inner_.transfer(sends, receives);
        constexpr std::size_t first_payload = sizeof(Mfp_header) + sizeof(Fragment_header);
        for (const Receive& receive : receives)
            if (receive.into.size() > sizeof(Mfp_announcement)) receive.into[first_payload + 5] ^= std::byte{0xFF};
        return done;
    }

private:
    Transport& inner_;
};

TEST(EventBuilder, SingleUnitBuildsEveryEvent) {
    Stop_flag stop;
    Tcp_transport transport(0, Tcp_mesh{std::vector<Fd>(1), std::vector<Fd>(1)}, stop);
    Unit_status status(0, 1);
    EXPECT_TRUE(run_unit(transport, status, 5));
    const auto counts = status.snapshot();
    EXPECT_EQ(counts.events_built, 5 * packing_factor);
    EXPECT_EQ(counts.events_incomplete, 0u);
    EXPECT_EQ(counts.meps_built, 5u);
}

TEST(EventBuilder, ThreeUnitsOverTcpBuildEveryEvent) {
    constexpr Rank units = 3;
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(units, stop);
    std::vector<std::unique_ptr<Unit_status>> statuses;
    {
        std::vector<std::jthread> threads;
        for (Rank rank = 0; rank < units; ++rank) {
            statuses.push_back(std::make_unique<Unit_status>(rank, units));
            threads.emplace_back([&, rank, status = statuses.back().get()] {
                Tcp_transport transport(rank, std::move(meshes[rank]), stop);
                try {
                    run_unit(transport, *status, 4);
                } catch (const std::exception& error) {
                    status->fail(error.what());
                }
            });
        }
    }
    for (const auto& status : statuses) {
        const auto counts = status->snapshot();
        EXPECT_EQ(counts.events_built, 4 * packing_factor) << "rank " << counts.rank;
        EXPECT_EQ(counts.events_incomplete, 0u);
        EXPECT_EQ(counts.last_error, "");
    }
}

TEST(EventBuilder, CorruptedMfpsAreCountedIncompleteNotBuilt) {
    Stop_flag stop;
    Tcp_transport tcp(0, Tcp_mesh{std::vector<Fd>(1), std::vector<Fd>(1)}, stop);
    Corrupting_transport transport(tcp);
    Unit_status status(0, 1);
    EXPECT_TRUE(run_unit(transport, status, 3));
    const auto counts = status.snapshot();
    EXPECT_EQ(counts.events_built, 3 * (packing_factor - 1)) << "one damaged fragment per MEP";
    EXPECT_EQ(counts.events_incomplete, 3u);
    EXPECT_EQ(counts.meps_built, 3u);
    EXPECT_NE(counts.last_error.find("source 0 event"), std::string::npos) << counts.last_error;
}

TEST(EventBuilder, UnitsWithDifferentPackingFactorsStopWithAClearError) {
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(2, stop);
    std::string errors[2];
    {
        std::vector<std::jthread> threads;
        for (Rank rank = 0; rank < 2; ++rank) {
            threads.emplace_back([&, rank] {
                Tcp_transport transport(rank, std::move(meshes[rank]), stop);
                Unit_status status(rank, 2);
                try {
                    run_unit(transport, status, 1, rank == 0 ? 50 : 60);
                } catch (const Transport_error& error) {
                    errors[rank] = error.what();
                }
            });
        }
    }
    for (const std::string& error : errors)
        EXPECT_NE(error.find("every unit needs the same --packing-factor"), std::string::npos) << error;
}

TEST(EventBuilder, StopsWhenAskedAndReportsIt) {
    Stop_flag stop;
    Tcp_transport transport(0, Tcp_mesh{std::vector<Fd>(1), std::vector<Fd>(1)}, stop);
    Unit_status status(0, 1);
    stop.request();
    EXPECT_FALSE(run_unit(transport, status, 0));
    EXPECT_EQ(status.snapshot().meps_built, 0u);
}

}  // namespace
}  // namespace eb
