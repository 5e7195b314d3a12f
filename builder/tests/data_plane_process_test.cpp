// The data plane as separate processes on 127.0.0.1: every layout, dummies
// and barrier kind with every MEP checked byte for byte; the shared-memory
// source and output with the readout emulator and the reference consumer,
// including crashes on either side of a ring; file replay; and barriers of
// up to 64 processes that prove nobody leaves before all arrived.

#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "base/socket.hpp"
#include "process_run.hpp"
#include "schedule/rank_table.hpp"
#include "test_support.hpp"

namespace eb {
namespace {

using namespace std::chrono_literals;
using test::Child;

using test::final_counts;
using test::Run;
using Clock = std::chrono::steady_clock;

struct Shape {
    const char* name;
    Rank units;
    Layout layout;
    std::vector<Rank> dummies;
    const char* barrier;
    const char* every;
};

class Shapes : public Run, public testing::WithParamInterface<Shape> {};

std::string join(const std::vector<Rank>& ranks) {
    std::string text;
    for (const Rank rank : ranks) text += (text.empty() ? "" : ",") + std::to_string(rank);
    return text;
}

// Every live BU builds 5 MEPs of 200 events, each checked in process. What
// the transports counted adds up: every byte sent over the network was
// received, an RU alone receives nothing and a BU alone sends nothing.
TEST_P(Shapes, EveryBuBuildsEveryEventIntact) {
    const Shape& shape = GetParam();
    const Rank_table table(flag_functions(shape.units, shape.layout, shape.dummies));
    std::vector<std::string> args = {"--peers", peers(shape.units), "--packing-factor", "200", "--events", "1000",
                                     "--size-model", "poisson", "--fragment-size", "133", "--layout",
                                     shape.layout == Layout::folded ? "folded" : "unfolded", "--barrier",
                                     shape.barrier, "--barrier-every", shape.every};
    if (!shape.dummies.empty()) args.insert(args.end(), {"--dummies", join(shape.dummies)});
    std::vector<Child*> units;
    for (const Rank rank : table.live_ranks()) units.push_back(&start_builder(rank, args));
    std::uint64_t sent = 0, received = 0;
    for (std::size_t i = 0; i < units.size(); ++i) {
        const Rank rank = table.live_ranks()[i];
        ASSERT_EQ(units[i]->wait_exit(30s), 0) << "rank " << rank;
        const std::string expected =
            table.runs_bu(rank) ? "stopped: 1000 events built, 0 incomplete, 5 MEPs" : "stopped: 0 events built";
        EXPECT_NE(units[i]->log().find(expected), std::string::npos) << "rank " << rank;
        const auto last = final_counts(units[i]->log());
        ASSERT_TRUE(last) << units[i]->log();
        if (!table.runs_bu(rank)) {
            EXPECT_EQ(last->network_received, 0u) << "RU-only rank " << rank;
        }
        if (!table.runs_ru(rank)) {
            EXPECT_EQ(last->network_sent, 0u) << "BU-only rank " << rank;
        }
        sent += last->network_sent;
        received += last->network_received;
    }
    EXPECT_GT(sent, 1000u * 133 / 2) << "the MFPs of other units crossed the network";
    EXPECT_EQ(sent, received);
}

INSTANTIATE_TEST_SUITE_P(
    DataPlane, Shapes,
    testing::Values(Shape{"Folded2Tournament", 2, Layout::folded, {}, "tournament", "1"},
                    Shape{"Folded3None", 3, Layout::folded, {}, "none", "1"},
                    Shape{"Folded5CentralizedEvery3", 5, Layout::folded, {}, "centralized", "3"},
                    Shape{"Folded8Tournament", 8, Layout::folded, {}, "tournament", "1"},
                    Shape{"Folded6Dummies", 6, Layout::folded, {1, 4}, "tournament", "2"},
                    Shape{"Unfolded4Centralized", 4, Layout::unfolded, {}, "centralized", "1"},
                    Shape{"Unfolded8DummyNone", 8, Layout::unfolded, {5}, "none", "1"}),
    [](const auto& shape) { return std::string(shape.param.name); });

// Over verbs an MFP reaches its BU only once the receive at its place in the
// MEP is posted: the credit each receive sends its RU holds the SEND back.
// Without it about one MFP in ten met a receive not posted yet and stalled
// the link for an RNR NAK's timer (docs/verbs.md). Soft-RoCE counts the RNR
// NAKs it received; the units must add none.
TEST_F(Run, NoMfpReachesABuBeforeItsReceiveIsPosted) {
    if (!test::over_verbs())
        GTEST_SKIP() << "verbs only (over TCP an MFP waits in the socket's buffer); make test-verbs runs it";
    const char* device = std::getenv("EB_RDMA_DEVICE");
    const std::string counter = std::string("/sys/class/infiniband/") + (device ? device : "") +
                                "/ports/1/hw_counters/rcvd_rnr_err";
    const auto rnr_naks = [&]() -> std::optional<std::uint64_t> {
        std::ifstream file(counter);
        std::uint64_t value = 0;
        if (!(file >> value)) return std::nullopt;
        return value;
    };
    const std::optional<std::uint64_t> before = rnr_naks();
    if (!before) EB_UNAVAILABLE("no " << counter << " (Soft-RoCE's count of RNR NAKs received) on this device");
    const Rank units = 3;
    const std::vector<std::string> args = {"--peers", peers(units), "--packing-factor", "2000", "--events", "200000",
                                           "--fragment-size", "128"};
    std::vector<Child*> started;
    for (Rank rank = 0; rank < units; ++rank) started.push_back(&start_builder(rank, args));
    for (Rank rank = 0; rank < units; ++rank) {
        ASSERT_EQ(started[rank]->wait_exit(60s), 0) << "rank " << rank;
        EXPECT_NE(started[rank]->log().find("stopped: 200000 events built, 0 incomplete, 100 MEPs"), std::string::npos)
            << started[rank]->log();
    }
    EXPECT_EQ(rnr_naks(), before) << "RNR NAKs during 100 cycles of 3 units";
}

// A BU whose consumer has stopped reading waits --output-timeout-ms for ring
// space before it posts its receives (once: after that it drops at once).
// Over verbs its RU peer holds the MFP for it that long (no MFP before its
// receive), and /status and /metrics count the held send and its wait,
// which show a late BU on a farm; over TCP the socket buffers the MFP and
// nothing is held.
TEST_F(Run, AnRuHoldsItsMfpForABuThatIsLateToPostItsReceive) {
    const bool verbs = test::over_verbs();
    auto [late_builder, builder, stuck, consumer] = start_with_stuck_consumer(500);
    ASSERT_EQ(stuck.wait_exit(10s), 0) << "it takes 2 MEPs and leaves";
    ASSERT_TRUE(test::eventually(
        [&] { return test::json_number(status_body(0), "meps_discarded").value_or(0) >= 2; }, 20s))
        << "rank 0 waits 500 ms for room once, then drops its MEPs\n" << status_body(0);
    const std::string status = status_body(1);
    const std::uint64_t held = test::json_number(status, "network_sends_held").value_or(0);
    const double held_seconds = test::json_real(status, "network_send_held_seconds").value_or(0);
    std::printf("rank 1 held %lu MFP sends for %.3f s in all\n", held, held_seconds);
    if (verbs) {
        EXPECT_GE(held, 1u) << status;
        EXPECT_GE(held_seconds, 0.4) << "the one for rank 0 waited about 500 ms\n" << status;
    } else {
        EXPECT_EQ(held, 0u) << status;
        EXPECT_EQ(held_seconds, 0.0) << status;
    }
    const auto metrics = get(1, "/metrics");
    ASSERT_TRUE(metrics);
    for (const char* metric : {"eb_network_sends_held_total ", "eb_network_send_held_seconds_total "})
        EXPECT_NE(metrics->body.find(verbs ? std::string(metric) : std::string(metric) + "0\n"), std::string::npos)
            << metrics->body;

    late_builder.signal(SIGTERM);
    builder.signal(SIGTERM);
    ASSERT_EQ(late_builder.wait_exit(10s), 0);
    ASSERT_EQ(builder.wait_exit(10s), 0);
    EXPECT_EQ(consumer.wait_exit(10s), 0) << consumer.log();
}

// A BU that dies while it is late to post its receive (here: waiting up
// to 10 s for ring space) is lost by its RU, which was holding its MFP for
// it (over verbs; over TCP, waiting for it), within the peer timeout; the
// RU's unit builds on alone, dropping the dead source's events.
TEST_F(Run, AnRuWaitingForALateBuThatDiesLosesItAndBuildsOn) {
    auto [late_builder, builder, stuck, consumer] = start_with_stuck_consumer(10'000);
    ASSERT_EQ(stuck.wait_exit(10s), 0) << "it takes 2 MEPs and leaves";
    // Rank 0's ring fills, and the set waits with it: rank 1's next event
    // stands still for half a second (a cycle takes milliseconds).
    std::uint64_t next_event = 0;
    auto since = Clock::now();
    ASSERT_TRUE(test::eventually([&] {
        const std::uint64_t now_at = test::json_number(status_body(1), "next_event").value_or(0);
        if (now_at != next_event) {
            next_event = now_at;
            since = Clock::now();
        }
        return next_event > 0 && Clock::now() - since >= 500ms;
    }, 20s)) << status_body(0) << "\n" << status_body(1);
    ASSERT_EQ(test::json_number(status_body(0), "meps_discarded"), 0u) << "still inside its first wait";

    late_builder.signal(SIGKILL);
    ASSERT_TRUE(late_builder.wait_exit(5s));
    const auto killed = Clock::now();
    ASSERT_TRUE(test::eventually(
        [&] { return status_body(1).find(R"("lost_peers":[0])") != std::string::npos; }, 5s))
        << status_body(1);
    const double lost_after = std::chrono::duration<double>(Clock::now() - killed).count();
    std::printf("rank 1 lost rank 0 %.3f s after it was killed\n", lost_after);
    EXPECT_LT(lost_after, 2.0) << "within the peer timeout (1 s) and a poll";
    const std::uint64_t dropped = test::json_number(status_body(1), "events_dropped").value_or(0);
    EXPECT_TRUE(test::eventually(
        [&] { return test::json_number(status_body(1), "events_dropped").value_or(0) > dropped + 100 * 100; }, 10s))
        << "building goes on: " << status_body(1);

    builder.signal(SIGTERM);
    EXPECT_EQ(builder.wait_exit(10s), 0);
    EXPECT_EQ(consumer.wait_exit(10s), 0) << consumer.log();
}

// Emulators feed the RUs through MFP rings, consumers check the BUs' MEP
// rings; every ring is gone afterwards.
TEST_F(Run, SharedMemorySourceAndOutputDeliverEveryEvent) {
    for (const Layout layout : {Layout::folded, Layout::unfolded}) {
        const Rank units = 4;
        const Rank_table table(flag_functions(units, layout, {}));
        const std::vector<std::string> common = {"--peers", peers(units), "--packing-factor", "300", "--events", "1500",
                                                 "--run", run_name_, "--ring-mib", "4", "--layout",
                                                 layout == Layout::folded ? "folded" : "unfolded"};
        std::vector<Child*> consumers, others;
        for (Rank rank = 0; rank < units; ++rank) {
            const std::vector<std::string> unit = with(common, {"--rank", std::to_string(rank)});
            if (table.runs_ru(rank))
                others.push_back(&start("emulator-" + std::to_string(rank), "eb-readout-emulator", unit));
            if (table.runs_bu(rank)) consumers.push_back(&start("consumer-" + std::to_string(rank), "eb-consumer", unit));
            others.push_back(&start_builder(rank, with(common, {"--source", "shm", "--output", "shm"})));
        }
        for (Child* consumer : consumers) {
            ASSERT_EQ(consumer->wait_exit(30s), 0);
            EXPECT_NE(consumer->log().find("consumer: 5 MEPs, 1500 events complete, 0 incomplete, 0 rejected"),
                      std::string::npos);
        }
        for (Child* other : others) EXPECT_EQ(other->wait_exit(10s), 0);
        for (Rank rank = 0; rank < units; ++rank)
            EXPECT_FALSE(ring_exists(rank, "mfp") || ring_exists(rank, "mep")) << "rank " << rank << " left a ring";
        run_name_ += "u";
    }
}

// In a pod the sidecars open the rings the operator names (EB_MFP_RING,
// EB_MEP_RING), whatever their flags would make of it: here their --run
// names other rings, and they still meet the builder's.
TEST_F(Run, SidecarsOpenTheRingsTheOperatorNames) {
    const std::vector<std::string> common = {"--peers", peers(1), "--packing-factor", "100", "--events", "400",
                                             "--ring-mib", "4"};
    const std::vector<std::string> elsewhere = with(common, {"--rank", "0", "--run", run_name_ + "x"});
    Child& emulator = start_with_environment("emulator", "eb-readout-emulator",
                                             {"EB_MFP_RING=/eb-" + run_name_ + "-0-mfp"}, elsewhere);
    Child& consumer =
        start_with_environment("consumer", "eb-consumer", {"EB_MEP_RING=/eb-" + run_name_ + "-0-mep"}, elsewhere);
    Child& builder = start_builder(0, with(common, {"--run", run_name_, "--source", "shm", "--output", "shm"}));
    EXPECT_EQ(consumer.wait_exit(30s), 0) << consumer.log();
    EXPECT_NE(consumer.log().find("consumer: 4 MEPs, 400 events complete, 0 incomplete"), std::string::npos)
        << consumer.log();
    EXPECT_EQ(builder.wait_exit(10s), 0);
    EXPECT_EQ(emulator.wait_exit(10s), 0);
}

TEST_F(Run, CorruptSourceMfpsAreRejectedCountedAndTheirEventsIncomplete) {
    const std::vector<std::string> common = {"--peers", peers(1), "--packing-factor", "100",
                                             "--events", "400", "--run", run_name_, "--ring-mib", "4"};
    start("emulator", "eb-readout-emulator", with(common, {"--rank", "0", "--corrupt-every", "2"}));
    Child& consumer = start("consumer", "eb-consumer", with(common, {"--rank", "0"}));
    Child& builder = start_builder(0, with(common, {"--source", "shm", "--output", "shm"}));
    EXPECT_EQ(consumer.wait_exit(30s), 1);
    EXPECT_NE(consumer.log().find("consumer: 4 MEPs, 200 events complete, 200 incomplete"), std::string::npos);
    EXPECT_EQ(builder.wait_exit(10s), 0);
    EXPECT_NE(builder.log().find("source MFP for chunk 1 rejected (MFP bad_magic: magic 0x4031, expected 0x40ce); sending 100 missing fragments"), std::string::npos);
}

// A consumer that crashes is replaced and the new one picks up where the
// last release left off; the builder never notices beyond a log line.
TEST_F(Run, AConsumerCrashIsSurvivedAndTheNextConsumerTakesOver) {
    const std::vector<std::string> common = {"--peers", peers(1), "--packing-factor", "100",
                                             "--run", run_name_, "--ring-mib", "1"};
    Child& builder = start_builder(0, with(common, {"--output", "shm"}));
    Child& first = start("consumer-1", "eb-consumer", with(common, {"--rank", "0", "--meps", "1000000"}));
    // Killed only once it has released a MEP (the ring's tail moved), so the
    // next consumer really resumes after it.
    ASSERT_TRUE(test::eventually([&] { return released_bytes(0, "mep") > 0; }, 10s));
    first.signal(SIGKILL);
    ASSERT_TRUE(first.wait_exit(5s));
    Child& second = start("consumer-2", "eb-consumer", with(common, {"--rank", "0", "--meps", "50"}));
    ASSERT_EQ(second.wait_exit(30s), 0);
    EXPECT_NE(second.log().find("consumer: 50 MEPs, 5000 events complete, 0 incomplete, 0 rejected"),
              std::string::npos);
    // Whichever side notices the dead reader first frees its slot and says so.
    EXPECT_TRUE(builder.log().find("died; waiting for a new reader") != std::string::npos ||
                second.log().find("taking over ring /eb-" + run_name_ + "-0-mep from dead reader") != std::string::npos);
    builder.signal(SIGTERM);
    EXPECT_EQ(builder.wait_exit(5s), 0);
    EXPECT_FALSE(ring_exists(0, "mep"));
}

// A pod's containers all get SIGTERM at once: a consumer whose builder
// stops, closing the ring under it, still removes its files (the per-stream
// tallies beside the ring), however many SIGTERMs come meanwhile. The
// moment a signal could kill it is short, so the stop is played 8 times.
TEST_F(Run, AConsumerSignalledOverAndOverAsItsBuilderStopsLeavesNoFiles) {
    for (int round = 0; round < 8 && !HasFailure(); ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        const std::vector<std::string> common = {"--peers", peers(1), "--packing-factor", "100",
                                                 "--run", run_name_, "--ring-mib", "1"};
        Child& builder = start_builder(0, with(common, {"--output", "shm"}));
        Child& consumer = start("consumer-" + std::to_string(round), "eb-consumer", with(common, {"--rank", "0"}));
        ASSERT_TRUE(test::eventually([&] { return ring_exists(0, "mep-consumer-streams"); }, 10s)) << consumer.log();
        builder.signal(SIGTERM);
        ASSERT_TRUE(consumer.signal_until_exit(SIGTERM, 20s).has_value());
        // Each round's builder is builder-0 again: its log is shown here,
        // before the next round starts another.
        EXPECT_EQ(builder.wait_exit(10s), 0) << builder.log();
        EXPECT_NE(consumer.log().find("consumer: "), std::string::npos) << "it was killed before its summary";
        for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
            EXPECT_FALSE(entry.path().filename().string().starts_with("eb-" + run_name_ + "-"))
                << entry.path() << " left behind";
    }
}

// A builder that fails closes its ring as failed: the consumer reports it
// and exits 1 at once, instead of taking it for the end of the run. The
// failure here: a replayed source file that runs out while the builder was
// asked for no --events limit, an error the session cannot build through.
TEST_F(Run, AConsumerFailsWhenItsBuilderFailed) {
    const std::vector<std::string> common = {"--peers", peers(1), "--packing-factor", "100", "--run", run_name_,
                                             "--ring-mib", "1", "--rank", "0"};
    const std::string file = dir_ + "/source-0.mfp";
    Child& writer = start("writer", "eb-readout-emulator", with(common, {"--events", "300", "--file", file}));
    ASSERT_EQ(writer.wait_exit(10s), 0);
    const std::vector<std::string> builder_args = {"--peers", common[1], "--packing-factor", "100", "--run", run_name_,
                                                   "--ring-mib", "1", "--output", "shm", "--source", "file",
                                                   "--source-file", file};
    Child& builder = start_builder(0, builder_args);
    Child& consumer = start("consumer", "eb-consumer", common);
    EXPECT_EQ(consumer.wait_exit(10s), 1);
    EXPECT_NE(consumer.log().find("failed before finishing"), std::string::npos);
    EXPECT_NE(consumer.log().find("consumer: 3 MEPs, 300 events complete, 0 incomplete, 0 rejected"),
              std::string::npos)
        << "every MEP built before the failure is delivered";

    // The builder holds ERROR, naming the cause, until reset or stopped.
    ASSERT_TRUE(test::eventually([&] { return status_body(0).find(R"("state":"ERROR")") != std::string::npos; }, 10s))
        << status_body(0);
    EXPECT_EQ(test::json_string(status_body(0), "last_error").value_or("").find("the MFP source has no more data"), 0u)
        << status_body(0);
    const auto ready = get(0, "/readyz");
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->status, 503);
    const auto health = get(0, "/healthz");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200) << "restarting would lose the error";
    builder.signal(SIGTERM);
    EXPECT_EQ(builder.wait_exit(5s), 0);
    EXPECT_NE(builder.log().find("stopped: 300 events built, 0 incomplete, 3 MEPs"), std::string::npos);
}

// A builder that has built its --events waits for its consumer to take the
// last MEPs before it ends. That wait is not building: the activity is idle
// and the building time (the rates over a run divide by it) stands still,
// up to the final line.
TEST_F(Run, WaitingForTheConsumerIsNoBuildingTime) {
    const std::vector<std::string> common = {"--peers", peers(1), "--packing-factor", "100", "--run", run_name_,
                                             "--ring-mib", "1", "--events", "500"};
    Child& builder = start_builder(0, with(common, {"--output", "shm"}));
    std::string status;
    ASSERT_TRUE(test::eventually(
        [&] {
            status = status_body(0);
            return test::json_number(status, "events_built") == 500u &&
                   status.find(R"("activity":"idle")") != std::string::npos;
        },
        10s))
        << status;
    const std::size_t at = status.find(R"("building_seconds":)") + 19;
    const std::string building = status.substr(at, status.find(',', at) - at);
    Child& consumer = start("consumer", "eb-consumer", with(common, {"--rank", "0"}));
    ASSERT_EQ(consumer.wait_exit(10s), 0);
    ASSERT_EQ(builder.wait_exit(10s), 0);
    // A single unit moves nothing over the network.
    const std::string final_line = " in doubt, after " + building + " s of building, 0 bytes sent and 0 received over the network in ";
    EXPECT_NE(builder.log().find(final_line), std::string::npos) << building << "\n" << builder.log();
    EXPECT_NE(builder.log().find(" s of data transfer (the requested events are built)"), std::string::npos)
        << building << "\n" << builder.log();
}

// A builder whose peer dies is no failed builder: it keeps its ring open and
// builds on, dropping (and counting) every MEP that misses the dead source,
// so its consumer only ever sees complete MEPs, in sequence, and ends
// cleanly when the builder is stopped.
TEST_F(Run, ABuilderWhosePeerDiedKeepsItsRingOpenAndDeliversOnlyCompleteMeps) {
    const std::vector<std::string> common = {"--peers", peers(2), "--packing-factor", "100", "--run", run_name_,
                                             "--ring-mib", "1"};
    Child& builder = start_builder(0, with(common, {"--output", "shm"}));
    Child& peer = start_builder(1, common);
    Child& consumer = start("consumer", "eb-consumer", with(common, {"--rank", "0"}));
    ASSERT_TRUE(test::eventually([&] { return released_bytes(0, "mep") > 0; }, 10s));
    peer.signal(SIGKILL);
    ASSERT_TRUE(peer.wait_exit(5s));

    std::uint64_t dropped_at_loss = 0;
    ASSERT_TRUE(test::eventually(
        [&] {
            const std::string status = status_body(0);
            dropped_at_loss = test::json_number(status, "events_dropped").value_or(0);
            return status.find(R"("lost_peers":[1])") != std::string::npos && dropped_at_loss > 0;
        },
        10s))
        << status_body(0);
    std::string status;
    ASSERT_TRUE(test::eventually(
        [&] {
            status = status_body(0);
            return test::json_number(status, "events_dropped").value_or(0) > dropped_at_loss + 100 * 100;
        },
        10s))
        << "building goes on: " << status;
    EXPECT_NE(status.find(R"("state":"RUNNING")"), std::string::npos) << status;
    EXPECT_EQ(test::json_number(status, "events_incomplete"), 0u) << status;
    EXPECT_FALSE(consumer.wait_exit(0ms)) << "the ring must stay open: " << consumer.log();

    builder.signal(SIGTERM);
    EXPECT_EQ(builder.wait_exit(5s), 0);
    EXPECT_EQ(consumer.wait_exit(10s), 0) << "every MEP it got was complete and in sequence";
    EXPECT_NE(consumer.log().find("the builder stopped before finishing"), std::string::npos);
    const auto last = final_counts(builder.log());
    ASSERT_TRUE(last) << "no final line: " << builder.log();
    EXPECT_EQ(last->incomplete, 0u);
    EXPECT_GT(last->dropped, dropped_at_loss);
    EXPECT_NE(consumer.log().find("consumer: " + std::to_string(last->meps) + " MEPs, " + std::to_string(last->built) +
                                  " events complete, 0 incomplete, 0 rejected"),
              std::string::npos)
        << "the consumer got every MEP the builder delivered, and only those";
}

// With --events the consumer knows how many MEPs are due: a builder stopped
// early leaves it short, and that is not a success.
TEST_F(Run, AConsumerFailsWhenFewerMepsThanRequestedArrive) {
    const std::vector<std::string> common = {"--peers", peers(1), "--packing-factor", "100", "--events", "100000000",
                                             "--run", run_name_, "--ring-mib", "1"};
    Child& builder = start_builder(0, with(common, {"--output", "shm"}));
    Child& consumer = start("consumer", "eb-consumer", with(common, {"--rank", "0"}));
    ASSERT_TRUE(test::eventually([&] { return released_bytes(0, "mep") > 0; }, 10s));
    builder.signal(SIGTERM);
    EXPECT_EQ(builder.wait_exit(5s), 0);
    EXPECT_EQ(consumer.wait_exit(10s), 1);
    EXPECT_NE(consumer.log().find("the builder stopped before finishing"), std::string::npos);
    EXPECT_NE(consumer.log().find("expected 1000000 MEPs (100000000 events), got "), std::string::npos);
}

// In a pod, a rank table with no live rank (every unit failed with no
// spare left) does not stop the readout driver: it is a spare's, onto
// which the operator restores a unit, and a driver that exited would sit
// in the kubelet's crash-loop back-off (up to 5 min) after the restore.
TEST_F(Run, APodsDriverGoesOnUnderATableWithNoLiveRank) {
    const std::string table = test::make_temp_dir() + "/ranks.json";
    std::ofstream(table) << R"({"version": "eventbuilder.daq.io/ranktable/v1", "run": "r", "epoch": 28, "layout": "Folded",
 "ranks": [{"rank": 0, "address": "r-eb-0.r-eb:7000", "state": "dummy", "leaf": 0, "port": 0},
           {"rank": 1, "address": "r-eb-1.r-eb:7000", "state": "dummy", "spare": true, "leaf": 0, "port": 1}]})";
    Child& emulator = start_with_environment(
        "emulator", "eb-readout-emulator",
        {"EB_RANK=1", "EB_PACKING_FACTOR=100", "EB_MFP_RING_MIB=4", "EB_RANK_TABLE=" + table},
        {"--run", run_name_, "--fragment-size", "64"});
    ASSERT_TRUE(test::eventually([&] { return ring_exists(1, "mfp"); }, 10s)) << emulator.log();
    EXPECT_NE(emulator.log().find("no live rank runs a BU"), std::string::npos) << emulator.log();
    emulator.signal(SIGTERM);
    EXPECT_EQ(emulator.wait_exit(10s), 0) << emulator.log();
}

// An MFP ring that cannot hold the MFPs the RU keeps plus one more would
// deadlock the emulator and the builder: refused at the start.
TEST_F(Run, TheEmulatorRefusesAnMfpRingTooSmallForACycle) {
    Child& emulator = start("emulator", "eb-readout-emulator",
                            {"--peers", peers(2), "--rank", "0", "--packing-factor", "1000", "--fragment-size", "1000",
                             "--run", run_name_, "--ring-mib", "2"});
    EXPECT_EQ(emulator.wait_exit(10s), 2);
    EXPECT_NE(emulator.log().find("raise --ring-mib of eb-readout-emulator to at least 4 MiB"), std::string::npos)
        << emulator.log();
    EXPECT_FALSE(ring_exists(0, "mfp"));
}

// A readout driver that crashes leaves a stale ring: the builder reports
// the dead writer, and the driver's next start reclaims the segment.
TEST_F(Run, AWriterCrashIsReportedAndItsStaleRingReclaimed) {
    const std::vector<std::string> common = {"--peers", peers(1), "--packing-factor", "100",
                                             "--run", run_name_, "--ring-mib", "1"};
    Child& emulator = start("emulator-1", "eb-readout-emulator", with(common, {"--rank", "0"}));
    Child& builder = start_builder(0, with(common, {"--source", "shm"}));
    // Attached and building: the ring is complete and in use.
    ASSERT_TRUE(test::eventually(
        [&] { return builder.log().find("INFO building under rank table epoch 1") != std::string::npos; }, 10s));
    emulator.signal(SIGKILL);
    ASSERT_TRUE(emulator.wait_exit(20s));
    ASSERT_TRUE(test::eventually([&] { return builder.log().find("died") != std::string::npos; }, 10s));
    EXPECT_NE(builder.log().find("the writer of ring /eb-" + run_name_ + "-0-mfp"), std::string::npos);
    // The unit cannot build without its source: ERROR, naming the ring, in its status.
    ASSERT_TRUE(test::eventually([&] { return status_body(0).find(R"("state":"ERROR")") != std::string::npos; }, 10s))
        << status_body(0);
    EXPECT_NE(test::json_string(status_body(0), "last_error").value_or("").find("the writer of ring /eb-" + run_name_ +
                                                                                "-0-mfp"),
              std::string::npos)
        << status_body(0);
    EXPECT_TRUE(ring_exists(0, "mfp")) << "a crashed writer cannot clean up";

    Child& second = start("emulator-2", "eb-readout-emulator", with(common, {"--rank", "0", "--events", "100"}));
    ASSERT_TRUE(test::eventually([&] { return second.log().find("reclaiming stale") != std::string::npos; }, 10s));
    second.signal(SIGTERM);
    builder.signal(SIGTERM);
    EXPECT_EQ(second.wait_exit(20s), 0);
    EXPECT_EQ(builder.wait_exit(20s), 0);
    EXPECT_FALSE(ring_exists(0, "mfp"));
}

TEST_F(Run, FileReplayFeedsTheRu) {
    const std::vector<std::string> common = {"--peers", peers(2), "--packing-factor", "100", "--events", "300",
                                             "--size-model", "poisson", "--fragment-size", "133"};
    for (Rank rank = 0; rank < 2; ++rank) {
        const std::string file = dir_ + "/source-" + std::to_string(rank) + ".mfp";
        Child& writer = start("writer-" + std::to_string(rank), "eb-readout-emulator",
                              with(common, {"--rank", std::to_string(rank), "--file", file}));
        ASSERT_EQ(writer.wait_exit(10s), 0);
    }
    std::vector<Child*> builders;
    for (Rank rank = 0; rank < 2; ++rank)
        builders.push_back(&start_builder(
            rank, with(common, {"--source", "file", "--source-file", dir_ + "/source-" + std::to_string(rank) + ".mfp"})));
    for (Child* builder : builders) {
        ASSERT_EQ(builder->wait_exit(30s), 0);
        EXPECT_NE(builder->log().find("stopped: 300 events built, 0 incomplete, 3 MEPs"), std::string::npos);
    }
}

// Barrier probes (eb-barrier-probe) run ROUNDS barriers; each counts itself
// into a shared witness file before a barrier and checks after it that all
// had. No probe is to be lost: 64 processes on a loaded 2-core machine can go
// a second unscheduled, so the peer timeout is 30 s (a lost peer would let
// the others pass without it).
class Probes : public Run {
protected:
    std::vector<Child*> start_probes(const char* kind, Rank units, int rounds) {
        std::ofstream(witness_).write(std::string(rounds * 4, '\0').data(), rounds * 4);
        const std::string list = peers(units);
        std::vector<Child*> probes;
        for (Rank rank = 0; rank < units; ++rank)
            probes.push_back(&start("probe-" + std::to_string(rank), "eb-barrier-probe",
                                    {"--rank", std::to_string(rank), "--peers", list, "--barrier", kind, "--events",
                                     std::to_string(rounds), "--http-port", "1", "--peer-timeout-ms", "30000",
                                     witness_}));
        return probes;
    }

    // How many probes counted themselves in before barrier `round`.
    std::uint32_t arrived_at(int round) const {
        std::ifstream file(witness_, std::ios::binary);
        file.seekg(round * 4);
        std::uint32_t count = 0;
        file.read(reinterpret_cast<char*>(&count), sizeof count);
        return count;
    }

    const std::string witness_ = dir_ + "/witness";
};

// N probes run 30 barriers of each kind.
class Barriers : public Probes, public testing::WithParamInterface<std::pair<const char*, Rank>> {};

TEST_P(Barriers, NoProcessLeavesBeforeAllArrived) {
    const auto [kind, units] = GetParam();
    const std::vector<Child*> probes = start_probes(kind, units, 30);
    int left_early = 0;
    for (Child* probe : probes) {
        const auto code = probe->wait_exit(60s);
        ASSERT_TRUE(code.has_value());
        if (std::string(kind) == "none") {
            left_early += *code == 3;
        } else {
            EXPECT_EQ(*code, 0) << probe->log();
        }
    }
    if (std::string(kind) == "none") {
        EXPECT_GT(left_early, 0) << "without a barrier the witness must catch someone";
    }
}

// A probe stopped mid-run for twice the builder's default peer timeout is
// waited for, not lost: the probe's transport takes the flags' 30 s peer
// timeout (it took the 1 s default, and the 64-probe barriers lost
// unscheduled probes on a loaded machine).
TEST_F(Probes, ABarrierProbeWaitsForAStoppedPeerUpToItsPeerTimeout) {
    constexpr int rounds = 100'000;
    const std::vector<Child*> probes = start_probes("tournament", 2, rounds);
    // Both are past their 1000th barrier before one is stopped.
    ASSERT_TRUE(test::eventually([&] { return arrived_at(1000) == 2; }, 20s)) << probes[0]->log();
    ASSERT_EQ(arrived_at(rounds - 1), 0u) << "the probes finished before one could be stopped; give them more rounds";
    probes[1]->signal(SIGSTOP);
    // The fault itself: silent for twice the default peer timeout.
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * default_peer_timeout_ms));
    probes[1]->signal(SIGCONT);
    for (Child* probe : probes) EXPECT_EQ(probe->wait_exit(60s), 0) << probe->log();
}

INSTANTIATE_TEST_SUITE_P(DataPlane, Barriers,
                         testing::Values(std::pair{"centralized", 2u}, std::pair{"tournament", 2u},
                                         std::pair{"centralized", 13u}, std::pair{"tournament", 13u},
                                         std::pair{"centralized", 64u}, std::pair{"tournament", 64u},
                                         std::pair{"none", 8u}),
                         [](const auto& run) { return std::string(run.param.first) + std::to_string(run.param.second); });

}  // namespace
}  // namespace eb
