// eb-builder processes driven through the control API, as the operator
// drives them: tokens and illegal commands, a live table switch that moves a
// unit to a spare without restarting anyone or losing an event, a killed
// unit that the others report and build around, and its restarted process
// rejoining the running set.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "base/fd.hpp"
#include "base/rank.hpp"
#include "base/stop_flag.hpp"
#include "controlled_set.hpp"
#include "pod_helpers.hpp"
#include "relay.hpp"
#include "test_support.hpp"

namespace eb {
namespace {

using namespace std::chrono_literals;

using test::Controlled_set;
using test::Relay;
using test::request;
constexpr const char* token = test::controlled_token;
constexpr std::uint64_t packing_factor = test::controlled_packing_factor;

TEST(ControlProcess, CommandsNeedTheTokenAndALegalState) {
    Controlled_set set(1);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    const std::uint16_t port = set.http_port(0);
    EXPECT_EQ(request(port, "POST", "/control/start", std::nullopt).status, 401);
    EXPECT_EQ(request(port, "POST", "/control/start", "wrong-token").status, 401);
    EXPECT_EQ(set.text(0, "state"), "NOT_READY") << "a refused command changes nothing";

    const auto illegal = set.command(0, "start");
    EXPECT_EQ(illegal.status, 409);
    EXPECT_NE(illegal.body.find("cannot start in state NOT_READY; allowed: configure, reset"), std::string::npos)
        << illegal.body;
    EXPECT_EQ(request(port, "GET", "/readyz", std::nullopt).status, 503);

    const auto bad = set.command(0, "configure", R"({"rank":0,"table":{"version":"v0"}})");
    EXPECT_EQ(bad.status, 400);
    EXPECT_NE(bad.body.find("table.version"), std::string::npos) << bad.body;
    const auto wrong_rank = set.command(0, "configure", set.configure_body(1, 1, {0}));
    EXPECT_EQ(wrong_rank.status, 400) << wrong_rank.body;

    ASSERT_EQ(set.command(0, "configure", set.configure_body(0, 2, {0})).status, 200);
    EXPECT_EQ(set.text(0, "state"), "READY");
    EXPECT_EQ(request(port, "GET", "/readyz", std::nullopt).status, 200);
    const auto older = set.command(0, "configure", set.configure_body(0, 1, {0}));
    EXPECT_EQ(older.status, 409);
    EXPECT_NE(older.body.find("epochs only go forward"), std::string::npos) << older.body;
    EXPECT_EQ(set.command(0, "resume").status, 409);
    ASSERT_EQ(set.command(0, "reset").status, 200);
    EXPECT_EQ(set.text(0, "state"), "NOT_READY");
    EXPECT_EQ(set.number(0, "epoch"), 2u) << "reset forgets the table, not what was reported last";
}

TEST(ControlProcess, ARunningSetMovesAUnitToASpareWithoutRestartOrLoss) {
    // Ranks 0-3 live, rank 4 a warm spare; then rank 2 fails over to rank 4.
    Controlled_set set(5);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, {0, 1, 2, 3});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(3, "events_built") > 0; }, 20s)) << set.logs();
    EXPECT_EQ(set.text(4, "activity"), "standby");
    EXPECT_EQ(set.text(4, "role"), "dummy");

    set.configure_all(2, {0, 1, 3, 4});
    ASSERT_TRUE(test::eventually([&] { return set.number(4, "events_built") > 0; }, 20s)) << set.logs();
    for (const Rank rank : {0, 1, 3, 4}) {
        EXPECT_EQ(set.number(rank, "epoch"), 2u) << rank;
        EXPECT_EQ(set.text(rank, "state"), "RUNNING") << rank;
    }
    EXPECT_EQ(set.text(2, "role"), "dummy");
    EXPECT_EQ(set.text(2, "activity"), "standby");
    const std::uint64_t built_by_2 = set.number(2, "events_built");
    EXPECT_GT(built_by_2, 0u);

    // One stop stops the whole set at one cycle boundary.
    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report({0, 1, 3, 4}, test::stopped, 10s)) << set.logs();
    const std::uint64_t next_event = set.number(0, "next_event");
    std::uint64_t built = 0;
    for (Rank rank = 0; rank < 5; ++rank) {
        const std::string status = set.status(rank);
        EXPECT_EQ(test::json_number(status, "events_incomplete"), 0u) << status;
        EXPECT_EQ(test::json_number(status, "events_dropped"), 0u) << status;
        if (rank != 2) {
            EXPECT_EQ(test::json_number(status, "next_event"), next_event) << status;
        }
        built += test::json_number(status, "events_built").value_or(0);
    }
    // Every event id below next_event built exactly once (the BUs check each
    // MEP's event range against their sequence): no event lost in the switch.
    EXPECT_EQ(built, next_event) << set.logs();
    const std::string metrics = test::http_get(set.http_port(0), "/metrics")->body;
    EXPECT_NE(metrics.find("eb_parse_errors_total{error=\"wrong_event_range\"} 0"), std::string::npos);
    EXPECT_NE(set.process(0).log().find("switched to rank table epoch 2"), std::string::npos);
    for (Rank rank = 0; rank < 5; ++rank) EXPECT_FALSE(set.process(rank).wait_exit(0ms)) << "nobody restarted";
}

// A builder pod's readout driver and HLT consumer as the operator runs them:
// no --peers, the unit described in their environment. The consumer follows
// a failover through what the builder publishes beside its ring, checks
// every event, and its counts reach the builder's /status.
TEST(ControlProcess, APodsReadoutDriverAndConsumerFollowAFailover) {
    const std::string run = test::unique_run_name("pod");
    Controlled_set set(3, Controlled_set::all_ranks(3), {"--source", "shm", "--output", "shm", "--run", run, "--ring-mib", "4"});
    ASSERT_TRUE(set.all_answer()) << set.logs();
    test::Pod_helpers pods(set, run, set.configure_body(0, 1, {0, 1}));
    set.configure_all(1, {0, 1});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return pods.consumed(1, "meps") > 0; }, 20s)) << pods.logs();

    set.configure_all(2, {0, 2});  // rank 1 fails over to the spare, rank 2
    ASSERT_TRUE(test::eventually([&] { return pods.consumed(2, "meps") > 0; }, 20s)) << pods.logs();
    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report({0, 2}, test::stopped, 10s)) << pods.logs();

    // Each consumer checked every event its builder handed it, all complete.
    const std::uint64_t next_event = set.number(0, "next_event");
    std::uint64_t built = 0;
    for (Rank rank = 0; rank < 3; ++rank) {
        const std::uint64_t handed = set.number(rank, "events_built");
        EXPECT_TRUE(test::eventually([&] { return pods.consumed(rank, "events_complete") == handed; }, 10s))
            << "rank " << rank << ": built " << handed << ", consumer " << set.status(rank) << pods.logs();
        EXPECT_EQ(pods.consumed(rank, "events_incomplete"), 0u) << rank;
        EXPECT_EQ(pods.consumed(rank, "rejected"), 0u) << rank;
        built += handed;
    }
    EXPECT_EQ(built, next_event) << "every event id below next_event built once, none lost in the failover";
    EXPECT_GT(pods.consumed(1, "events_complete"), 0u) << "the BU that moved keeps its consumer's final counts";
    EXPECT_NE(pods.consumer(2).log().find("MEPs of rank table epoch 2"), std::string::npos) << pods.consumer(2).log();

    pods.terminate_all();
}

// Readout is physical: when rank 1's server fails, its unit moves to the
// spare (rank 2), which reads its own fibres, and rank 1's stream is read
// by no one (the table's unreadStreams). Every MEP says so in its stream
// map: under --incomplete flag each consumer counts, per stream, the events
// of the new epoch as lacking the lost stream and holding the spare's, and
// counts them incomplete; nothing is rejected.
TEST(ControlProcess, AfterAFailoverEveryMepSaysWhichDetectorStreamItLacks) {
    const std::string run = test::unique_run_name("streams");
    Controlled_set set(3, Controlled_set::all_ranks(3),
                       {"--source", "shm", "--output", "shm", "--run", run, "--ring-mib", "4", "--incomplete", "flag"});
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.name_streams({{{"velo-0a", "velo-0b"}, {"ut-1"}, {"spare:2/a"}}, {}});
    test::Pod_helpers pods(set, run, set.configure_body(0, 1, {0, 1}));
    set.configure_all(1, {0, 1});
    set.command_all("start");
    const auto held = [&](Rank rank, const std::string& stream) { return pods.streams(rank)[stream].first; };
    const auto lacked = [&](Rank rank, const std::string& stream) { return pods.streams(rank)[stream].second; };
    ASSERT_TRUE(test::eventually([&] { return held(0, "ut-1") > 0 && held(1, "velo-0a") > 0; }, 20s)) << pods.logs();
    EXPECT_EQ(pods.consumed(0, "events_incomplete") + pods.consumed(1, "events_incomplete"), 0u) << "nothing lacked yet";
    EXPECT_EQ(pods.streams(0).count("spare:2/a"), 0u) << "the spare's stream is in no event yet";

    set.name_streams({{{"velo-0a", "velo-0b"}, {}, {"spare:2/a"}}, {"ut-1"}});
    set.configure_all(2, {0, 2});
    for (const Rank rank : {0, 2})
        ASSERT_TRUE(test::eventually([&] { return lacked(rank, "ut-1") > 0 && held(rank, "spare:2/a") > 0; }, 20s))
            << "rank " << rank << pods.logs();
    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report({0, 2}, test::stopped, 10s)) << pods.logs();
    for (const Rank rank : {0, 2}) {
        const std::uint64_t flagged = set.number(rank, "events_incomplete");
        ASSERT_TRUE(test::eventually([&] { return pods.consumed(rank, "events_incomplete") == flagged; }, 10s))
            << "rank " << rank << ": " << set.status(rank) << pods.logs();
        // The file is rewritten as the consumer goes: read it until it is as far along.
        auto counts = pods.streams(rank);
        EXPECT_TRUE(test::eventually([&] { return (counts = pods.streams(rank))["ut-1"].second == flagged; }, 10s))
            << "rank " << rank << ": every flagged event lacks ut-1, and only those: " << counts["ut-1"].second << " of "
            << flagged;
        EXPECT_GT(flagged, 0u) << rank;
        EXPECT_EQ(counts["spare:2/a"].first, flagged) << "rank " << rank << ": the spare's stream is in each of them";
        EXPECT_EQ(counts["velo-0a"].second, 0u) << "rank " << rank << ": the surviving unit's streams are in every event";
        EXPECT_EQ(pods.consumed(rank, "rejected"), 0u) << rank;
    }
    EXPECT_NE(pods.consumer(2).log().find("lacks ut-1"), std::string::npos) << pods.consumer(2).log();
    pods.terminate_all();
}

// Every unit of a running set lost at once (a server with all of them): the
// spares that take over have no unit in session to learn the set's place
// from. The table's resumeEvent (where the operator last saw the run, plus
// what may have been built since) is where they go on: event ids are never
// built twice.
TEST(ControlProcess, SparesTakingOverTheWholeSetGoOnFromTheResumeEvent) {
    Controlled_set set(4);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, {0, 1});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(1, "events_built") > 0; }, 20s)) << set.logs();
    ASSERT_EQ(set.command(0, "pause").status, 200);
    ASSERT_TRUE(set.all_report({0, 1}, R"("activity":"paused")", 10s)) << set.logs();
    const std::uint64_t resume = set.number(0, "next_event");
    for (const Rank rank : {0, 1}) set.process(rank).signal(SIGKILL);

    for (const Rank rank : {2, 3}) {
        std::string body = set.configure_body(rank, 2, {2, 3});
        body.replace(body.find("\"epoch\":2"), 9, "\"epoch\":2,\"resumeEvent\":" + std::to_string(resume));
        ASSERT_EQ(set.command(rank, "configure", body).status, 200) << body;
    }
    ASSERT_TRUE(test::eventually([&] { return set.number(3, "events_built") > 0; }, 20s)) << set.logs();
    ASSERT_EQ(set.command(2, "stop").status, 200);
    ASSERT_TRUE(set.all_report({2, 3}, test::stopped, 10s)) << set.logs();
    const Controlled_set::Totals spares = set.totals({2, 3});
    const std::uint64_t next_event = set.number(2, "next_event");
    EXPECT_EQ(spares.built, next_event - resume) << "the spares built exactly the events from " << resume << " on";
    EXPECT_EQ(spares.incomplete + spares.dropped, 0u);
    EXPECT_EQ(set.parse_errors(2) + set.parse_errors(3), 0u) << "each MEP in sequence from the resume event";
}

TEST(ControlProcess, AKilledUnitIsReportedWithinASecondAndTheCountsAddUp) {
    Controlled_set set(4);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, {0, 1, 2, 3});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(3, "events_built") > 0; }, 20s)) << set.logs();

    const std::uint64_t built_by_victim = set.kill_while_paused(3).built;
    const auto resumed = std::chrono::steady_clock::now();
    ASSERT_TRUE(set.all_report({0, 1, 2}, R"("lost_peers":[3])", 2s)) << set.logs();
    EXPECT_LT(std::chrono::steady_clock::now() - resumed, 1s) << "the loss is reported within a second";
    const std::string metrics = test::http_get(set.http_port(1), "/metrics")->body;
    EXPECT_NE(metrics.find("eb_peer_up{peer=\"3\"} 0"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("eb_peers_lost_total 1"), std::string::npos);

    // The others build on: their own MEPs miss source 3 and are dropped; rank
    // 3's chunks are built nowhere and dropped.
    const std::uint64_t built_before = set.number(0, "events_built");
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "events_dropped") > 0; }, 10s)) << set.logs();
    ASSERT_EQ(set.command(1, "stop").status, 200);
    ASSERT_TRUE(set.all_report({0, 1, 2}, test::stopped, 10s)) << set.logs();
    EXPECT_EQ(set.number(0, "events_built"), built_before) << "nothing missing a source counts as built";
    std::uint64_t delivered = built_by_victim, dropped = 0;
    for (const Rank rank : {0, 1, 2}) {
        EXPECT_EQ(set.number(rank, "events_incomplete"), 0u);
        delivered += set.number(rank, "events_built");
        dropped += set.number(rank, "events_dropped");
    }
    EXPECT_EQ(delivered + dropped, set.number(0, "next_event")) << set.logs();
}

// A controlled unit's SIGTERM is its pod going: it leaves alone, at once, and
// the set builds on without it until the operator acts; it does not stop
// its set as a self-configured unit does.
TEST(ControlProcess, ASignalledUnitLeavesAloneAndItsPeersBuildOn) {
    Controlled_set set(4);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, {0, 1, 2, 3});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(3, "events_built") > 0; }, 20s)) << set.logs();

    set.process(3).signal(SIGTERM);
    EXPECT_EQ(set.process(3).wait_exit(2s), 0) << "exits 0 at once\n" << set.logs();
    ASSERT_TRUE(set.all_report({0, 1, 2}, R"("lost_peers":[3])", 2s)) << set.logs();
    const std::uint64_t next = set.number(0, "next_event");
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "next_event") > next; }, 10s))
        << "the others go on cycling without it\n" << set.logs();
    for (const Rank rank : {0, 1, 2}) EXPECT_EQ(set.text(rank, "state"), "RUNNING") << rank;
}

// A resume that reaches a unit after its pause but before the set got to the
// cycle boundary where it pauses is not lost: the unit goes on there. Every
// unit is told pause and at once resume, round after round (one unit after
// the other, or all pauses then all resumes), and the set must be building
// after each round.
TEST(ControlProcess, APauseResumedAtOnceLeavesTheSetBuilding) {
    Controlled_set set(4);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, {0, 1, 2, 3});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(3, "events_built") > 0; }, 20s)) << set.logs();
    for (int round = 0; round < 20; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        std::vector<std::pair<Rank, std::string>> commands;
        for (const Rank rank : set.ranks()) commands.insert(commands.end(), {{rank, "pause"}, {rank, "resume"}});
        if (round % 2 == 1)
            std::stable_partition(commands.begin(), commands.end(), [](const auto& c) { return c.second == "pause"; });
        for (const auto& [rank, name] : commands) {
            const int status = set.command(rank, name).status;
            // A pause is refused (409) once the set has paused this unit by another's vote.
            EXPECT_TRUE(status == 200 || (status == 409 && name == "pause")) << name << " " << rank << ": " << status;
        }
        // Twice: the cycle that carried the last pause vote may still
        // complete before its boundary.
        for (int cycle = 0; cycle < 2; ++cycle) {
            std::vector<std::uint64_t> built;
            for (const Rank rank : set.ranks()) built.push_back(set.number(rank, "events_built"));
            ASSERT_TRUE(test::eventually([&] {
                for (const Rank rank : set.ranks())
                    if (set.number(rank, "events_built") <= built[rank]) return false;
                return true;
            }, 5s)) << set.logs();
        }
        EXPECT_TRUE(set.all_report(set.ranks(), R"("state":"RUNNING","activity":"building")", 0ms)) << set.logs();
    }
}

// A pause always reaches the set, however quickly the unit is resumed: the
// set pauses at the end of the next cycle, the resumed unit goes on there
// and its kept resume is used up. So a pause and resume to one unit leave
// nothing behind that lets it skip a later pause of the set: here both
// reach rank 0 in one cycle, while rank 1, still paused, holds the set in
// that cycle (rank 0 has cast its vote for it). Then a pause via rank 2
// must pause every unit, rank 0 included, until each is resumed.
TEST(ControlProcess, APauseAndResumeToOneUnitLeaveNoResumeForALaterPause) {
    Controlled_set set(4);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, {0, 1, 2, 3});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(3, "events_built") > 0; }, 20s)) << set.logs();
    const auto all_build = [&] {
        std::vector<std::uint64_t> built;
        for (const Rank rank : set.ranks()) built.push_back(set.number(rank, "events_built"));
        return test::eventually([&] {
            for (const Rank rank : set.ranks())
                if (set.number(rank, "events_built") <= built[rank]) return false;
            return true;
        }, 10s);
    };

    ASSERT_EQ(set.command(2, "pause").status, 200);
    ASSERT_TRUE(set.all_report(set.ranks(), R"("state":"PAUSED","activity":"paused")", 10s)) << set.logs();
    for (const Rank rank : {0, 2, 3}) ASSERT_EQ(set.command(rank, "resume").status, 200) << rank;
    ASSERT_TRUE(set.all_report({0, 2, 3}, R"("activity":"building")", 10s)) << set.logs();
    ASSERT_EQ(set.command(0, "pause").status, 200);
    ASSERT_EQ(set.command(0, "resume").status, 200);
    ASSERT_EQ(set.command(1, "resume").status, 200);
    ASSERT_TRUE(set.all_report({1, 2, 3}, R"("state":"PAUSED","activity":"paused")", 10s))
        << "rank 0's pause pauses the set\n" << set.logs();
    EXPECT_TRUE(set.all_report({0}, R"("state":"RUNNING","activity":"building")", 0ms)) << "resumed, it goes on";
    for (const Rank rank : {1, 2, 3}) ASSERT_EQ(set.command(rank, "resume").status, 200) << rank;
    ASSERT_TRUE(all_build()) << set.logs();

    ASSERT_EQ(set.command(2, "pause").status, 200);
    ASSERT_TRUE(set.all_report(set.ranks(), R"("state":"PAUSED","activity":"paused")", 10s))
        << "rank 0 pauses with the set\n" << set.logs();
    const std::uint64_t next_event = set.number(0, "next_event");
    for (const Rank rank : set.ranks()) EXPECT_EQ(set.number(rank, "next_event"), next_event) << "one boundary";
    set.command_all("resume");
    ASSERT_TRUE(all_build()) << set.logs();
    EXPECT_TRUE(set.all_report(set.ranks(), R"("state":"RUNNING","activity":"building")", 0ms)) << set.logs();
}

// A unit reports READY as soon as it is stopped, but the set stops only at
// the end of the cycle that carries the unit's stop vote. A start that
// reaches the unit inside that cycle is kept: the set stops there, the other
// units go READY, and this one stays RUNNING and connects for the next
// session, so an operator that starts the others sees every unit build.
// Slow cycles (500 events/s per source) make the start land inside it.
TEST(ControlProcess, AStartBeforeTheSetHasStoppedIsKept) {
    Controlled_set set(3, Controlled_set::all_ranks(3), {"--rate", "500"});
    const std::set<Rank> everyone = set.ranks();
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, everyone);
    set.command_all("start");
    ASSERT_TRUE(set.all_report(everyone, R"("activity":"building")", 10s)) << set.logs();
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "next_event") > 0; }, 10s)) << set.logs();

    const std::uint64_t before = set.number(0, "next_event");
    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "next_event") > before; }, 10s))
        << "the cycle after the stop carries its vote\n" << set.logs();
    ASSERT_EQ(set.command(0, "start").status, 200);
    ASSERT_TRUE(set.all_report({1, 2}, test::stopped, 10s)) << "the set stops\n" << set.logs();
    EXPECT_TRUE(set.all_report({0}, R"("state":"RUNNING","activity":"connecting")", 10s))
        << "the start is kept\n" << set.logs();
    for (const Rank rank : {1, 2}) ASSERT_EQ(set.command(rank, "start").status, 200) << rank;
    EXPECT_TRUE(set.all_report(everyone, R"("state":"RUNNING","activity":"building")", 10s)) << set.logs();
}

// After a stop, the stopped units of `ranks` agree on the next event and
// hold `epoch`; none built an event incomplete, dropped one or rejected an
// MFP; and together they built every event below the next exactly once
// (each BU checks its MEPs' event ranges in sequence).
void expect_every_event_built_once(Controlled_set& set, const std::set<Rank>& ranks, std::uint64_t epoch) {
    const std::uint64_t next_event = set.number(*ranks.begin(), "next_event");
    std::uint64_t built = 0;
    for (const Rank rank : ranks) {
        const std::string status = set.status(rank);
        EXPECT_EQ(test::json_number(status, "epoch"), epoch) << status;
        EXPECT_EQ(test::json_number(status, "next_event"), next_event) << status;
        EXPECT_EQ(test::json_number(status, "events_incomplete"), 0u) << status;
        EXPECT_EQ(test::json_number(status, "events_dropped"), 0u) << status;
        EXPECT_EQ(set.parse_errors(rank), 0u) << "rank " << rank;
        built += test::json_number(status, "events_built").value_or(0);
    }
    EXPECT_EQ(built, next_event) << "every event built exactly once\n" << set.logs();
}

// An Unfolded set as the operator plans one: the units' RUs on ranks 0 and
// 1, their BUs on ranks 2 and 3, rank 4 a dummy. Every MEP is checked in
// the BUs (every source present, payload as generated, event ranges in
// sequence). Then a new epoch moves functions in the running set (rank 0
// RU to BU, rank 2 BU to RU; a replan does that): they open and close their
// sources and outputs at the switch, and no event is lost or built twice.
TEST(ControlProcess, AnUnfoldedSetBuildsWithRusAndBusWhereTheTablePutsThem) {
    Controlled_set set(5);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, "Unfolded", {"RU", "RU", "BU", "BU", ""});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(2, "meps_built") >= 3 && set.number(3, "meps_built") >= 3; }, 20s))
        << set.logs();
    EXPECT_EQ(set.text(4, "activity"), "standby");
    for (const Rank ru : {0, 1}) EXPECT_EQ(set.number(ru, "meps_built"), 0u) << "an RU builds nothing";

    set.configure_all(2, "Unfolded", {"BU", "RU", "RU", "BU", ""});
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "meps_built") >= 3; }, 20s)) << set.logs();
    const std::uint64_t built_by_2 = set.number(2, "events_built");
    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report({0, 1, 2, 3}, test::stopped, 10s)) << set.logs();
    EXPECT_EQ(set.number(2, "events_built"), built_by_2) << "rank 2 built nothing once it ran the RU";
    EXPECT_EQ(set.number(1, "events_built"), 0u);

    expect_every_event_built_once(set, {0, 1, 2, 3}, 2);
    EXPECT_NE(set.process(2).log().find("this rank no longer runs a BU"), std::string::npos) << set.process(2).log();
}

// A Folded set where a unit's BU moves to a spare while its RU goes on
// reading (the reference design's partly unfolded unit, after its host
// could no longer take its output): epoch 2 takes rank 0's BU to rank 3, a
// spare until then. Rank 0 keeps sending its MFPs and builds nothing more;
// rank 3 builds the unit's share from then on; every MEP, checked in its
// BU, holds all three sources, and no event is lost or built twice.
TEST(ControlProcess, AUnitsBUMovesToASpareWhileItsRUGoesOnReading) {
    Controlled_set set(4);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, "Folded", {"RU+BU", "RU+BU", "RU+BU", ""});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "meps_built") >= 3; }, 20s)) << set.logs();
    set.configure_all(2, "Folded", {"RU", "RU+BU", "RU+BU", "BU"});
    ASSERT_TRUE(test::eventually([&] { return set.number(3, "meps_built") >= 3; }, 20s)) << set.logs();
    const std::uint64_t built_by_0 = set.number(0, "events_built");
    const std::uint64_t sent_by_0 = set.number(0, "network_bytes_sent");
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "network_bytes_sent") > sent_by_0; }, 10s))
        << "rank 0's RU goes on sending\n" << set.logs();
    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report(set.ranks(), test::stopped, 10s)) << set.logs();
    EXPECT_EQ(set.number(0, "events_built"), built_by_0) << "rank 0 runs no BU since epoch 2";
    expect_every_event_built_once(set, set.ranks(), 2);
    EXPECT_EQ(test::json_number(set.status(3), "network_bytes_sent"), 0u) << "rank 3 reads nothing, so sends nothing";
}

// A Folded set with a unit whose readout is unread (the operator's table
// after a server with fibres failed and a spare without any took its unit
// over): rank 2 runs its BU alone with sourceUnread. Every MEP keeps rank
// 2's slot, as missing fragments, so no event is complete and the policy
// decides: --incomplete flag delivers every event flagged incomplete (each
// BU's checker expects four sources and finds them: no parse error), drop
// delivers none and counts each as dropped. Rank 2 builds its share either way and sends nothing.
class UnreadSource : public testing::TestWithParam<std::string> {};

TEST_P(UnreadSource, HasItsSlotInEveryMEPAndThePolicyDecides) {
    const bool flag = GetParam() == "flag";
    Controlled_set set(4, Controlled_set::all_ranks(4), {"--incomplete", GetParam()});
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, "Folded", {"RU+BU", "RU+BU", std::string(Controlled_set::unread_bu), "RU+BU"});
    set.command_all("start");
    const char* counter = flag ? "events_incomplete" : "events_dropped";
    ASSERT_TRUE(test::eventually([&] {
        for (const Rank rank : set.ranks())
            if (set.number(rank, counter) < 3 * test::controlled_packing_factor) return false;
        return true;
    }, 20s)) << set.logs();
    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report(set.ranks(), test::stopped, 10s)) << set.logs();
    const std::uint64_t next_event = set.number(0, "next_event");
    std::uint64_t accounted = 0;
    for (const Rank rank : set.ranks()) {
        const std::string status = set.status(rank);
        const std::uint64_t built = test::json_number(status, "events_built").value_or(0);
        const std::uint64_t incomplete = test::json_number(status, "events_incomplete").value_or(0);
        const std::uint64_t dropped = test::json_number(status, "events_dropped").value_or(0);
        EXPECT_EQ(built, 0u) << "no event is complete\n" << status;
        EXPECT_EQ(flag ? dropped : incomplete, 0u) << status;
        EXPECT_EQ(set.parse_errors(rank), 0u) << "rank " << rank;
        accounted += incomplete + dropped;
    }
    EXPECT_EQ(accounted, next_event) << "every event " << (flag ? "delivered" : "dropped") << " once\n" << set.logs();
    EXPECT_EQ(test::json_number(set.status(2), "network_bytes_sent"), 0u) << "rank 2 reads nothing, so sends nothing";
}

INSTANTIATE_TEST_SUITE_P(ControlProcess, UnreadSource, testing::Values("flag", "drop"),
                         [](const auto& policy) { return policy.param; });

// A stream of the run that no RU reads (the table's unreadStreams) leaves
// every MEP without it: under the default --incomplete drop no event is
// delivered, each counted dropped once; the BUs' checkers expect the map
// the table gives and reject nothing.
TEST(ControlProcess, AStreamNoRuReadsDropsEveryEventUnderDrop) {
    Controlled_set set(2);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.name_streams({{{"a-0"}, {"b-1", "b-2"}}, {"lost-3"}});
    set.configure_all(1, set.ranks());
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "events_dropped") >= 3 * test::controlled_packing_factor; }, 20s))
        << set.logs();
    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report(set.ranks(), test::stopped, 10s)) << set.logs();
    std::uint64_t dropped = 0;
    for (const Rank rank : set.ranks()) {
        EXPECT_EQ(set.number(rank, "events_built"), 0u) << set.status(rank);
        EXPECT_EQ(set.number(rank, "events_incomplete"), 0u) << set.status(rank);
        EXPECT_EQ(set.parse_errors(rank), 0u) << "rank " << rank;
        dropped += set.number(rank, "events_dropped");
    }
    EXPECT_EQ(dropped, set.number(0, "next_event")) << "every event dropped once\n" << set.logs();
}

// A reset ends a session inside a cycle: every RU has already taken that
// cycle's MFPs from its source. The next session must start each source
// exactly at the set's next chunk, not where the source was left: the set
// builds again with no MFP rejected, no MEP out of sequence, no ERROR.
// Three sessions, each reset while building, then one stopped together.
TEST(ControlProcess, ASessionResetMidCycleLeavesTheNextOneBuildingFromTheSetsPlace) {
    Controlled_set set(3);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    for (std::uint64_t epoch = 1; epoch <= 4; ++epoch) {
        SCOPED_TRACE("session " + std::to_string(epoch));
        set.configure_all(epoch, set.ranks());
        set.command_all("start");
        std::vector<std::uint64_t> meps;
        for (const Rank rank : set.ranks()) meps.push_back(set.number(rank, "meps_built"));
        ASSERT_TRUE(test::eventually([&] {
            for (const Rank rank : set.ranks())
                if (set.number(rank, "meps_built") < meps[rank] + 5) return false;
            return true;
        }, 10s)) << set.logs();
        for (const Rank rank : set.ranks()) {
            EXPECT_EQ(set.text(rank, "activity"), "building") << rank;
            EXPECT_EQ(set.number(rank, "events_incomplete"), 0u) << rank;
            EXPECT_EQ(set.parse_errors(rank), 0u) << "rank " << rank << "\n" << set.logs();
        }
        if (epoch < 4) {
            set.command_all("reset");
            ASSERT_TRUE(set.all_report(set.ranks(), R"("activity":"idle")", 10s)) << set.logs();
        }
    }
    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report(set.ranks(), test::stopped, 10s)) << set.logs();
    EXPECT_EQ(set.logs().find("rejected"), std::string::npos) << set.logs();
}

// A killed unit's rank, restarted as a fresh process on the same port, rejoins
// the running set under a new epoch with the same table: the set reconnects
// it at the switch, it goes on from the set's place in the event stream, and
// no event is counted twice or lost uncounted. Parameter: the restarted
// process is first configured with the old epoch, under which the set will
// never take it back, before the operator's new epoch reaches it.
class RestartedUnit : public testing::TestWithParam<bool> {};

TEST_P(RestartedUnit, RejoinsTheRunningSetUnderANewEpoch) {
    const bool first_with_old_epoch = GetParam();
    Controlled_set set(4);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, {0, 1, 2, 3});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(2, "events_built") > 0; }, 20s)) << set.logs();

    const std::uint64_t built_by_victim = set.kill_while_paused(2).built;
    const auto resumed = std::chrono::steady_clock::now();
    ASSERT_TRUE(set.all_report({0, 1, 3}, R"("lost_peers":[2])", 2s)) << set.logs();
    EXPECT_LT(std::chrono::steady_clock::now() - resumed, 1s) << "the loss is reported within a second";
    // Its peers dial its data port (Lost_peer_probe): nothing listens there.
    EXPECT_TRUE(set.all_report({0, 1, 3}, R"("lost_peers":[2],"lost_peers_reachable":[],)", 0ms)) << set.logs();

    set.start(2);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    if (first_with_old_epoch) {
        ASSERT_EQ(set.command(2, "configure", set.configure_body(2, 1, {0, 1, 2, 3})).status, 200);
        // Configured, it listens: its peers reach it again, and say so.
        ASSERT_TRUE(set.all_report({0, 1, 3}, R"("lost_peers":[2],"lost_peers_reachable":[2],)", 5s)) << set.logs();
        ASSERT_EQ(set.command(2, "start").status, 200);
        ASSERT_TRUE(set.all_report({2}, R"("activity":"connecting")", 10s)) << set.logs();
        EXPECT_TRUE(set.all_report({0, 1, 3}, R"("lost_peers":[2])", 0ms)) << "the set does not take it back at epoch 1";
    }
    ASSERT_EQ(set.command(2, "configure", set.configure_body(2, 2, {0, 1, 2, 3})).status, 200);
    if (!first_with_old_epoch) {
        ASSERT_TRUE(set.all_report({0, 1, 3}, R"("lost_peers":[2],"lost_peers_reachable":[2],)", 5s)) << set.logs();
        ASSERT_EQ(set.command(2, "start").status, 200);
    }
    for (const Rank rank : {0, 1, 3})
        ASSERT_EQ(set.command(rank, "configure", set.configure_body(rank, 2, {0, 1, 2, 3})).status, 200);

    const std::set<Rank> everyone = set.ranks();
    ASSERT_TRUE(set.all_report(everyone, R"("epoch":2,"pending_epoch":0)", 20s)) << set.logs();
    ASSERT_TRUE(set.all_report(everyone, R"("lost_peers":[])", 10s)) << set.logs();
    ASSERT_TRUE(test::eventually([&] { return set.number(2, "events_built") > 0; }, 10s)) << set.logs();
    const std::uint64_t rejoined_at = set.number(2, "events_built");
    ASSERT_TRUE(test::eventually([&] { return set.number(2, "events_built") > rejoined_at; }, 10s)) << set.logs();
    for (const Rank rank : everyone) {
        EXPECT_EQ(set.text(rank, "state"), "RUNNING") << rank;
        EXPECT_EQ(set.text(rank, "activity"), "building") << rank;
    }

    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report(everyone, test::stopped, 10s)) << set.logs();
    const std::uint64_t next_event = set.number(0, "next_event");
    std::uint64_t delivered = built_by_victim, dropped = 0;
    for (const Rank rank : everyone) {
        const std::string status = set.status(rank);
        EXPECT_EQ(test::json_number(status, "next_event"), next_event) << status;
        EXPECT_EQ(test::json_number(status, "events_incomplete"), 0u) << status;
        delivered += test::json_number(status, "events_built").value_or(0);
        dropped += test::json_number(status, "events_dropped").value_or(0);
        const std::string metrics = test::http_get(set.http_port(rank), "/metrics")->body;
        EXPECT_NE(metrics.find("eb_parse_errors_total{error=\"wrong_event_range\"} 0"), std::string::npos) << rank;
    }
    EXPECT_GT(dropped, 0u) << "what the set built without rank 2 was dropped";
    EXPECT_EQ(delivered + dropped, next_event) << set.logs();
}

INSTANTIATE_TEST_SUITE_P(ControlProcess, RestartedUnit, testing::Bool(), [](const auto& first_with_old_epoch) {
    return first_with_old_epoch.param ? "FirstConfiguredWithTheOldEpoch" : "ConfiguredWithTheNewEpoch";
});

// A restarted unit whose process answers late (its server's network, or its
// pod, not up when the running set got the rejoin epoch) costs the set
// nothing: the set builds on under its table until the joiner's data port
// answers (Joiner_watch), then switches, and it joins; nobody gives up on
// it (no join timeout), which would stall the set and fail the rejoin.
TEST(ControlProcess, TheSetSwitchesOnlyOnceAJoinerAnswers) {
    Controlled_set set(4, {0, 1, 2, 3}, {"--join-timeout-ms", "20000"});  // far more than the test's wait
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, {0, 1, 2, 3});
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(2, "events_built") > 0; }, 20s)) << set.logs();
    set.kill_while_paused(2);
    const std::set<Rank> running{0, 1, 3}, everyone = set.ranks();
    ASSERT_TRUE(set.all_report(running, R"("lost_peers":[2])", 2s)) << set.logs();

    for (const Rank rank : running)
        ASSERT_EQ(set.command(rank, "configure", set.configure_body(rank, 2, everyone)).status, 200) << rank;
    ASSERT_TRUE(set.all_report(running, R"("epoch":1,"pending_epoch":2)", 10s)) << set.logs();
    const std::uint64_t held_at = set.number(0, "next_event");
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "next_event") > held_at + 20 * test::controlled_packing_factor; }, 10s))
        << set.logs();
    EXPECT_TRUE(set.all_report(running, R"("epoch":1,"pending_epoch":2)", 0ms))
        << "the set switched before its joiner answered\n" << set.logs();

    set.start(2);
    ASSERT_TRUE(set.all_answer()) << set.logs();
    ASSERT_EQ(set.command(2, "configure", set.configure_body(2, 2, everyone)).status, 200);
    ASSERT_EQ(set.command(2, "start").status, 200);
    ASSERT_TRUE(set.all_report(everyone, R"("epoch":2,"pending_epoch":0)", 10s)) << set.logs();
    ASSERT_TRUE(set.all_report(everyone, R"("lost_peers":[])", 10s)) << set.logs();
    const std::uint64_t joined_at = set.number(2, "events_built");
    ASSERT_TRUE(test::eventually([&] { return set.number(2, "events_built") > joined_at; }, 10s)) << set.logs();
    for (const Rank rank : everyone) {
        const std::string metrics = test::http_get(set.http_port(rank), "/metrics")->body;
        EXPECT_NE(metrics.find("eb_transport_errors_total{kind=\"join_timeout\"} 0\n"), std::string::npos)
            << "rank " << rank << " gave up on a joiner\n" << metrics;
    }
}

// A rank that a new epoch makes live but that cannot join the running set
// must not wedge it: within the join timeout every unit goes on under the
// new epoch with that rank lost (its events dropped, counted), and a later
// epoch with the same table takes it in once it can connect. Parameter: no
// process at that rank's address at all, or a joiner that reaches ranks 0
// and 1 but not rank 2 (rank 2's table has a wrong address for it: a
// one-sided partition), which the set must give up on as a whole, not unit
// by unit.
enum class Unreachable { no_process, from_one_unit };

class UnreachableJoiner : public testing::TestWithParam<Unreachable> {};

TEST_P(UnreachableJoiner, IsLostForTheWholeSetWithinTheJoinTimeoutAndJoinsLater) {
    constexpr auto join_timeout = 2000ms;
    const bool no_process = GetParam() == Unreachable::no_process;
    const std::set<Rank> running{0, 1, 2}, everyone{0, 1, 2, 3};
    Controlled_set set(4, no_process ? running : everyone,
                       {"--join-timeout-ms", std::to_string(join_timeout.count())});
    const std::set<Rank>& started = no_process ? running : everyone;
    ASSERT_TRUE(set.all_report(started, R"("state":"NOT_READY")", 10s)) << set.logs();
    set.configure(started, 1, running);  // rank 3 a dummy: a warm spare where it has a process
    for (const Rank rank : started) ASSERT_EQ(set.command(rank, "start").status, 200) << rank;
    ASSERT_TRUE(test::eventually([&] { return set.number(2, "events_built") > 0; }, 20s)) << set.logs();

    if (no_process) {
        set.configure(running, 2, everyone);
    } else {
        set.configure({0, 1, 3}, 2, everyone);
        std::string body = set.configure_body(2, 2, everyone);
        const std::string address = "127.0.0.1:" + std::to_string(set.data_port(3));
        body.replace(body.find(address), address.size(), "127.0.0.1:" + std::to_string(test::free_ports(1)[0]));
        ASSERT_EQ(set.command(2, "configure", body).status, 200);
    }
    // The set builds on under epoch 1 while it waits for rank 3's data port
    // to answer (Joiner_watch), the join timeout at most; then it switches
    // and gives up on it within another.
    const auto configured = std::chrono::steady_clock::now();
    ASSERT_TRUE(set.all_report(running, R"("epoch":2,"pending_epoch":0)", 10s)) << set.logs();
    ASSERT_TRUE(set.all_report(running, R"("lost_peers":[3])", join_timeout + 1s)) << set.logs();
    // Timed to the loss itself, the building that follows having a deadline
    // of its own: 2 join timeouts by design, 4.01 s measured here over TCP,
    // 4.08-4.57 s in the Soft-RoCE VM (which once took 5.06 s to the
    // building too, over the 1 s slack this had).
    const auto lost_after = std::chrono::steady_clock::now() - configured;
    EXPECT_TRUE(set.all_report(running, R"("activity":"building")", join_timeout + 1s)) << set.logs();
    EXPECT_LT(lost_after, 2 * join_timeout + 1500ms);
    std::printf("rank 3 lost by the whole set %.3f s after its epoch was configured (join timeout %.1f s)\n",
                std::chrono::duration<double>(lost_after).count(), std::chrono::duration<double>(join_timeout).count());
    for (const Rank rank : running) {
        const std::string metrics = test::http_get(set.http_port(rank), "/metrics")->body;
        EXPECT_NE(metrics.find("eb_transport_errors_total{kind=\"join_timeout\"} 1\n"), std::string::npos) << rank;
        EXPECT_NE(metrics.find("eb_peer_up{peer=\"3\"} 0\n"), std::string::npos) << rank;
        EXPECT_NE(metrics.find("eb_peers_lost_total 1\n"), std::string::npos) << rank;
    }
    if (!no_process) {
        // It judges its join from the verdicts the set sends as it gives up
        // on it: its log may say so a moment after the set reports it lost.
        EXPECT_TRUE(test::eventually([&] { return set.process(3).log().find("could not join the running set") != std::string::npos; },
                                     5s)) << set.logs();
        EXPECT_EQ(set.text(3, "activity"), "connecting") << set.logs();
    }
    // The set cycles on without rank 3: every MEP misses its source and is
    // dropped, and so are the chunks rank 3 would have built.
    const std::uint64_t next = set.number(0, "next_event"), dropped = set.number(0, "events_dropped");
    ASSERT_TRUE(test::eventually([&] {
        return set.number(0, "next_event") > next + 10 * packing_factor &&
               set.number(0, "events_dropped") > dropped + 10 * packing_factor;
    }, 10s)) << set.logs();

    // Once rank 3 can connect, a new epoch with the same table takes it in.
    if (no_process) {
        set.start(3);
        ASSERT_TRUE(set.all_report({3}, R"("state":"NOT_READY")", 10s)) << set.logs();
        set.configure({3}, 3, everyone);
        ASSERT_EQ(set.command(3, "start").status, 200);
        set.configure(running, 3, everyone);
    } else {
        set.configure(everyone, 3, everyone);
    }
    ASSERT_TRUE(set.all_report(everyone, R"("epoch":3,"pending_epoch":0)", 20s)) << set.logs();
    ASSERT_TRUE(set.all_report(everyone, R"("lost_peers":[])", 10s)) << set.logs();
    const std::uint64_t joined_at = set.number(3, "events_built");
    ASSERT_TRUE(test::eventually([&] { return set.number(3, "events_built") > joined_at; }, 10s)) << set.logs();
    EXPECT_TRUE(set.all_report(everyone, R"("state":"RUNNING","activity":"building")", 0ms)) << set.logs();

    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report(everyone, test::stopped, 10s)) << set.logs();
    const std::uint64_t next_event = set.number(0, "next_event");
    std::uint64_t delivered = 0, all_dropped = 0;
    for (const Rank rank : everyone) {
        const std::string status = set.status(rank);
        EXPECT_EQ(test::json_number(status, "next_event"), next_event) << status;
        EXPECT_EQ(test::json_number(status, "events_incomplete"), 0u) << status;
        EXPECT_EQ(set.parse_errors(rank), 0u) << "rank " << rank;
        delivered += test::json_number(status, "events_built").value_or(0);
        all_dropped += test::json_number(status, "events_dropped").value_or(0);
    }
    EXPECT_EQ(delivered + all_dropped, next_event) << "every event built once or counted dropped\n" << set.logs();
}

INSTANTIATE_TEST_SUITE_P(ControlProcess, UnreachableJoiner,
                         testing::Values(Unreachable::no_process, Unreachable::from_one_unit), [](const auto& unreachable) {
                             return unreachable.param == Unreachable::no_process ? "NoProcess" : "ReachedByOnlySomeUnits";
                         });

// A unit cut off from its set while its process ran (its data network
// down) builds on alone at its own place in the event stream. Taken back
// by a later epoch like a restarted process, it must not put the set out
// of step (every unit in ERROR): the set refuses it as a joiner that did
// not connect and it refuses the set, building on alone, until a reset
// makes it join afresh. The units dial rank 3 through a relay, cut once
// the set builds. Then an epoch 2 makes rank 3 a dummy for the others (the
// operator cannot reach it either), so they do 3 chunks a cycle while it
// does 4: the two cannot meet at the same place by chance.
TEST(ControlProcess, AUnitThatBuiltOnAloneIsRefusedByTheSetItRejoinsAndJoinsAfterAReset) {
    Controlled_set set(4, Controlled_set::all_ranks(4), {"--join-timeout-ms", "2000"});
    const std::set<Rank> running{0, 1, 2}, everyone{0, 1, 2, 3};
    Relay relay(set.data_port(3));
    const std::string direct = "127.0.0.1:" + std::to_string(set.data_port(3));
    const auto configure = [&](const std::set<Rank>& ranks, std::uint64_t epoch, const std::set<Rank>& live) {
        for (const Rank rank : ranks) {
            std::string body = set.configure_body(rank, epoch, live);
            if (rank != 3) body.replace(body.find(direct), direct.size(), "127.0.0.1:" + std::to_string(relay.port()));
            ASSERT_EQ(set.command(rank, "configure", body).status, 200) << rank;
        }
    };
    ASSERT_TRUE(set.all_answer()) << set.logs();
    configure(everyone, 1, everyone);
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(3, "events_built") > 0; }, 20s)) << set.logs();

    relay.cut();
    ASSERT_TRUE(set.all_report(running, R"("lost_peers":[3])", 10s)) << set.logs();
    ASSERT_TRUE(set.all_report({3}, R"("lost_peers":[0,1,2])", 10s)) << set.logs();
    configure(running, 2, running);
    ASSERT_TRUE(set.all_report(running, R"("epoch":2,"pending_epoch":0)", 10s)) << set.logs();
    const std::uint64_t alone_at = set.number(3, "next_event"), set_at = set.number(0, "next_event");
    ASSERT_TRUE(test::eventually([&] {
        return set.number(3, "next_event") > alone_at && set.number(0, "next_event") > set_at;
    }, 10s)) << "both build on\n" << set.logs();

    configure(everyone, 3, everyone);
    ASSERT_TRUE(set.all_report(everyone, R"("epoch":3,"pending_epoch":0)", 10s)) << set.logs();
    ASSERT_TRUE(set.all_report(running, R"("lost_peers":[3])", 10s)) << set.logs();
    ASSERT_TRUE(set.all_report({3}, R"("lost_peers":[0,1,2])", 10s)) << set.logs();
    for (const Rank rank : everyone) {
        const std::string metrics = test::http_get(set.http_port(rank), "/metrics")->body;
        EXPECT_NE(metrics.find(std::string("eb_transport_errors_total{kind=\"out_of_step\"} ") +
                               (rank == 3 ? "3\n" : "1\n")),
                  std::string::npos) << rank << "\n" << metrics;
    }
    // The set cycles on without it (its MEPs miss source 3: dropped).
    const std::uint64_t next = set.number(0, "next_event");
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "next_event") > next; }, 10s)) << set.logs();
    EXPECT_TRUE(set.all_report(everyone, R"("state":"RUNNING","activity":"building")", 0ms)) << set.logs();

    // The operator's remedy: reset it, then take it back by a new epoch.
    ASSERT_EQ(set.command(3, "reset").status, 200);
    configure({3}, 4, everyone);
    ASSERT_EQ(set.command(3, "start").status, 200);
    configure(running, 4, everyone);
    ASSERT_TRUE(set.all_report(everyone, R"("epoch":4,"pending_epoch":0)", 20s)) << set.logs();
    ASSERT_TRUE(set.all_report(everyone, R"("lost_peers":[])", 10s)) << set.logs();
    const std::uint64_t joined_at = set.number(3, "events_built");
    ASSERT_TRUE(test::eventually([&] { return set.number(3, "events_built") > joined_at; }, 10s)) << set.logs();
    EXPECT_TRUE(set.all_report(everyone, R"("state":"RUNNING","activity":"building")", 0ms)) << set.logs();
    for (const Rank rank : everyone) EXPECT_EQ(set.parse_errors(rank), 0u) << "rank " << rank;
}

}  // namespace
}  // namespace eb
