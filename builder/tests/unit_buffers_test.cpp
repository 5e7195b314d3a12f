#include "unit/unit_buffers.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>

#include "formats/mfp_parser.hpp"
#include "buffers/shm_ring.hpp"
#include "telemetry/unit_status.hpp"

namespace eb {
namespace {

// A unit held in ERROR marks its MEP ring failed for the consumer; after the
// reset, the next session must not hand its MEPs to that failed ring.
TEST(UnitBuffers, AfterAFailedOutputTheNextSessionWritesToAFreshRing) {
    Config config;
    config.output = Output_kind::shm;
    config.ring_mib = 1;
    config.run_name = "unitbuffers" + std::to_string(::getpid());
    Unit_status status(0);
    Stop_flag stop;
    Data_threads threads(1, Busy_poll(std::chrono::microseconds(0)));
    Unit_buffers buffers(config, 0, status, stop, threads);
    const Rank_table table({Rank_function::ru_bu});
    buffers.fit(table);
    buffers.fail_output();

    buffers.fit(table);  // the next session
    ASSERT_NE(buffers.output(), nullptr);
    Shm_ring_reader consumer(ring_name(config.run_name, 0, "mep"), stop);
    const auto mep = buffers.output()->allocate(64);
    std::memset(mep.data(), 1, mep.size());
    buffers.output()->commit();
    EXPECT_EQ(consumer.next().size(), 64u) << "the new session's MEP reaches a consumer";
    consumer.release();
    buffers.stop_output();
    try {
        EXPECT_TRUE(consumer.next().empty());
        EXPECT_EQ(consumer.end(), Ring_end::stopped) << "the new session's ring ends as that session did";
    } catch (const Ring_error& error) {
        FAIL() << "the consumer was told the new session failed: " << error.what();
    }
}

// A set stopped and started again on a table of more ranks takes one MFP per
// BU of a cycle from each RU: the generated source must hold that many.
TEST(UnitBuffers, AGeneratedSourceHoldsACycleOfALargerTableAfterAResize) {
    Config config;
    config.output = Output_kind::discard;
    Unit_status status(0);
    Stop_flag stop;
    Data_threads threads(1, Busy_poll(std::chrono::microseconds(0)));
    Unit_buffers buffers(config, 0, status, stop, threads);
    const Rank_table two({Rank_function::ru_bu, Rank_function::ru_bu});
    buffers.fit(two);
    buffers.start_source_at(0);
    for (int i = 0; i < 2; ++i) buffers.source()->next();
    for (int i = 0; i < 2; ++i) buffers.source()->release();

    const Rank_table three({Rank_function::ru_bu, Rank_function::ru_bu, Rank_function::ru_bu});
    buffers.fit(three);  // between sessions
    buffers.start_source_at(2);
    for (std::uint64_t chunk = 2; chunk < 5; ++chunk) {
        std::span<const std::byte> mfp;
        ASSERT_NO_THROW(mfp = buffers.source()->next()) << "chunk " << chunk << " of a cycle of three BUs";
        Mfp_view view;
        ASSERT_TRUE(parse_mfp(mfp, view).ok());
        EXPECT_EQ(view.header.first_event_id, chunk * config.packing_factor);
    }
}

}  // namespace
}  // namespace eb
