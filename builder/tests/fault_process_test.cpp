// The fault-injection suite: real eb-builder processes on 127.0.0.1, driven
// as the operator drives them, under the faults a farm meets. A consumer
// that stops reading; a unit stopped with SIGSTOP (a hung process whose
// kernel still acknowledges); a link that loses everything one way; bytes
// changed on the data wire; a storm of connections on the control and data
// ports; units killed and restarted round after round. After each, every
// event of the set's cycles is counted once (built, incomplete or dropped),
// no damaged event is counted as built, and no unit is in ERROR.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controlled_set.hpp"
#include "base/fd.hpp"
#include "process_run.hpp"
#include "base/rank.hpp"
#include "relay.hpp"
#include "test_support.hpp"

namespace eb {
namespace {

using namespace std::chrono_literals;
using test::Child;
using test::Controlled_set;
using test::Relay;
using Clock = std::chrono::steady_clock;
constexpr std::uint64_t packing_factor = test::controlled_packing_factor;
constexpr const char* stray_address = "127.0.0.2";  // another host to the units

std::set<Rank> without(std::set<Rank> ranks, Rank rank) {
    ranks.erase(rank);
    return ranks;
}

// `"lost_peers":[a,b]` as /status writes it.
std::string lost_peers(const std::set<Rank>& ranks) {
    std::string list;
    for (const Rank rank : ranks) list += (list.empty() ? "" : ",") + std::to_string(rank);
    return "\"lost_peers\":[" + list + "]";
}

// A configure body with `rank`'s address replaced by the relay's: the unit
// it goes to reaches that rank through the relay.
std::string through_relay(std::string body, const Controlled_set& set, Rank rank, const Relay& relay) {
    const std::string direct = "\"127.0.0.1:" + std::to_string(set.data_port(rank)) + "\"";
    body.replace(body.find(direct), direct.size(), "\"127.0.0.1:" + std::to_string(relay.port()) + "\"");
    return body;
}

void expect_no_error(const Controlled_set& set) {
    for (const Rank rank : set.ranks()) EXPECT_NE(set.text(rank, "state"), "ERROR") << "rank " << rank << "\n" << set.logs();
}

// Once the set has stopped through `via`: each unit it put out is told on
// its own. Returns the set's next event once all have stopped.
std::uint64_t stop_the_others(Controlled_set& set, Rank via) {
    for (const Rank rank : set.ranks())
        if (!set.all_report({rank}, R"("state":"READY")", 2s)) {
            EXPECT_EQ(set.command(rank, "stop").status, 200) << rank;
        }
    EXPECT_TRUE(set.all_report(set.ranks(), test::stopped, 10s)) << set.logs();
    return set.number(via, "next_event");
}

// Stops the set through `via`; a unit the set put out (it cycles alone) is
// told on its own. Returns the set's next event once all have stopped.
std::uint64_t stop_everyone(Controlled_set& set, Rank via) {
    EXPECT_EQ(set.command(via, "stop").status, 200);
    EXPECT_TRUE(set.all_report({via}, test::stopped, 10s)) << set.logs();
    return stop_the_others(set, via);
}

// Every event of the set's cycles built once, found incomplete or dropped,
// none twice, and any counted nowhere among those in doubt (chunks a unit
// could not know the set's count of: docs/control-api.md, "One set").
// `gone`: the counts of processes no longer there.
void expect_every_event_counted_once(const Controlled_set& set, std::uint64_t next_event,
                                     Controlled_set::Totals gone = {}) {
    const Controlled_set::Totals totals = gone += set.totals(set.ranks());
    const std::uint64_t counted = totals.built + totals.incomplete + totals.dropped;
    std::printf("events: %lu built, %lu incomplete, %lu dropped; the set's cycles held %lu: %ld counted nowhere, "
                "%lu in doubt\n",
                totals.built, totals.incomplete, totals.dropped, next_event,
                static_cast<long>(next_event) - static_cast<long>(counted), totals.in_doubt);
    std::string by_rank;
    for (const Rank rank : set.ranks()) {
        const auto own = set.totals({rank});
        by_rank += "rank " + std::to_string(rank) + ": " + std::to_string(own.built) + " built, " +
                   std::to_string(own.incomplete) + " incomplete, " + std::to_string(own.dropped) + " dropped, " +
                   std::to_string(own.in_doubt) + " in doubt\n";
    }
    EXPECT_LE(counted, next_event) << "an event counted twice\n" << by_rank << set.logs();
    EXPECT_LE(next_event, counted + totals.in_doubt) << "an event counted nowhere\n" << by_rank << set.logs();
}

// The rank's eb_transport_errors_total of `kind` (a Link_failure name):
// its peer connections given up on that way.
std::uint64_t transport_errors(const Controlled_set& set, Rank rank, std::string_view kind) {
    const std::string metrics = test::http_get(set.http_port(rank), "/metrics").value_or(test::Http_reply{}).body;
    const std::string key = "eb_transport_errors_total{kind=\"" + std::string(kind) + "\"} ";
    const std::size_t at = metrics.find(key);
    EXPECT_NE(at, std::string::npos) << "rank " << rank << " has no " << key << "\n" << metrics;
    return at == std::string::npos ? 0 : std::stoull(metrics.substr(at + key.size()));
}

// Whether every rank of `ranks` goes on past its `key` count within 10 s:
// "events_built" where it builds, "next_event" where it cycles on (a set
// missing a unit drops every MEP).
bool all_go_on(const Controlled_set& set, const std::set<Rank>& ranks, std::string_view key = "events_built") {
    std::vector<std::uint64_t> before;
    for (const Rank rank : ranks) before.push_back(set.number(rank, key));
    return test::eventually([&] {
        std::size_t index = 0;
        for (const Rank rank : ranks)
            if (set.number(rank, key) <= before[index++]) return false;
        return true;
    }, 10s);
}

// One BU's consumer stops reading: its ring fills, and after
// --output-timeout-ms each further MEP of that BU is assembled and dropped
// there, counted; the other BU and its consumer go on at full pace (no
// global back pressure, reference design section IV-B), and at the stop the
// counts add up: built + dropped = every event of the set's cycles.
class SlowConsumer : public test::Run {};

TEST_F(SlowConsumer, CostsOnlyItsOwnBuildersMeps) {
    auto [stuck_builder, builder, stuck, consumer] = start_with_stuck_consumer(50);
    ASSERT_EQ(stuck.wait_exit(10s), 0) << "it takes 2 MEPs and leaves";
    // A 1 MiB ring holds about 80 MEPs of 13 KB: far more than that are built
    // on, and rank 0 drops what its ring cannot take.
    std::string status;
    ASSERT_TRUE(test::eventually(
        [&] {
            status = status_body(0);
            return test::json_number(status_body(1), "meps_built").value_or(0) > 400 &&
                   test::json_number(status, "meps_discarded").value_or(0) > 100;
        },
        20s))
        << status << "\n" << status_body(1);
    const auto metrics = get(0, "/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->body.find("eb_meps_discarded_total 0\n"), std::string::npos) << "the metric counts them";
    EXPECT_NE(metrics->body.find("eb_meps_discarded_total "), std::string::npos);
    // What the operator moves a BU on (spec.outputStallPolicy MoveBU): time
    // since the output took a MEP, growing; the other BU's output flows.
    const double stalled = test::json_real(status, "output_stalled_seconds").value_or(0);
    EXPECT_GT(stalled, 0.0) << status;
    EXPECT_TRUE(test::eventually(
        [&] { return test::json_real(status_body(0), "output_stalled_seconds").value_or(0) > stalled; }, 10s))
        << status_body(0);
    EXPECT_EQ(test::json_real(status_body(1), "output_stalled_seconds"), 0.0) << status_body(1);

    stuck_builder.signal(SIGTERM);
    builder.signal(SIGTERM);
    ASSERT_EQ(stuck_builder.wait_exit(10s), 0);
    ASSERT_EQ(builder.wait_exit(10s), 0);
    EXPECT_EQ(consumer.wait_exit(10s), 0) << consumer.log();
    const auto zero = test::final_counts(stuck_builder.log()), one = test::final_counts(builder.log());
    ASSERT_TRUE(zero && one) << stuck_builder.log() << builder.log();
    EXPECT_EQ(one->dropped, 0u) << "the other BU lost nothing";
    EXPECT_GT(zero->dropped, 0u);
    EXPECT_EQ(zero->built + zero->dropped, one->built + one->dropped) << "both BUs ran the same cycles";
    EXPECT_NE(stuck_builder.log().find("the output had no room for it within 50 ms"), std::string::npos);
}

// A unit stopped with SIGSTOP keeps its connections up (its kernel still
// acknowledges) but sends no heartbeat: every peer loses it within the peer
// timeout, the set builds on without it, and once woken it finds itself cut
// off and cycles alone, counting nothing. Parameter: the stopped rank (0
// leads the set; 2 does not).
class StoppedUnit : public testing::TestWithParam<Rank> {};

TEST_P(StoppedUnit, IsLostByEveryPeerWithinThePeerTimeoutAndTheCountsAddUp) {
    const Rank victim = GetParam();
    Controlled_set set(4, Controlled_set::all_ranks(4), {"--peer-timeout-ms", "1000"});
    const std::set<Rank> everyone = set.ranks(), others = without(everyone, victim);
    const Rank survivor = *others.begin();
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, everyone);
    set.command_all("start");
    ASSERT_TRUE(test::eventually([&] { return set.number(victim, "events_built") > 0; }, 20s)) << set.logs();

    set.process(victim).signal(SIGSTOP);
    const auto stopped = Clock::now();
    ASSERT_TRUE(set.all_report(others, lost_peers({victim}), 5s)) << set.logs();
    const double detected = std::chrono::duration<double>(Clock::now() - stopped).count();
    std::printf("rank %u stopped: lost by every peer after %.3f s (peer timeout 1 s)\n", victim, detected);
    EXPECT_LT(detected, 2.0) << "the peer timeout and a cycle";
    const std::uint64_t next = set.number(survivor, "next_event");
    ASSERT_TRUE(test::eventually([&] { return set.number(survivor, "next_event") > next + 10 * packing_factor; }, 10s))
        << "the others build on\n" << set.logs();

    set.process(victim).signal(SIGCONT);
    ASSERT_TRUE(set.all_report({victim}, lost_peers(others), 10s)) << "woken, it finds itself cut off\n" << set.logs();
    expect_no_error(set);
    const std::uint64_t next_event = stop_everyone(set, survivor);
    for (const Rank rank : others) EXPECT_EQ(set.number(rank, "next_event"), next_event) << rank;
    EXPECT_EQ(set.totals(everyone).incomplete, 0u);
    EXPECT_GT(set.totals(everyone).dropped, 0u);
    expect_every_event_counted_once(set, next_event);
    expect_no_error(set);
}

INSTANTIATE_TEST_SUITE_P(Faults, StoppedUnit, testing::Values(Rank{0}, Rank{2}),
                         [](const auto& victim) { return "Rank" + std::to_string(victim.param); });

// A link that loses everything rank 0 sends to rank 2 while the other way
// works (a one-way partition): rank 2 hears nothing from rank 0 and loses
// it; rank 0 hears rank 2 well. The set must still take one decision: rank 2
// goes out for every unit (of two units that lost each other, the higher
// rank), ranks 0, 1 and 3 build on alike, and every event is counted once.
// Rank 0 dials rank 2 through one relay; rank 2 dials rank 0 through
// another, whose way back carries rank 0's heartbeats to rank 2.
TEST(Faults, ALinkThatLosesEverythingOneWayPutsOneUnitOutForTheWholeSet) {
    Controlled_set set(4, Controlled_set::all_ranks(4), {"--peer-timeout-ms", "1000"});
    const std::set<Rank> everyone = set.ranks(), set_on = {0, 1, 3};
    Relay to_2(set.data_port(2)), to_0(set.data_port(0));
    ASSERT_TRUE(set.all_answer()) << set.logs();
    for (const Rank rank : everyone) {
        std::string body = set.configure_body(rank, 1, everyone);
        if (rank == 0) body = through_relay(body, set, 2, to_2);
        if (rank == 2) body = through_relay(body, set, 0, to_0);
        ASSERT_EQ(set.command(rank, "configure", body).status, 200) << rank;
    }
    set.command_all("start");
    ASSERT_TRUE(all_go_on(set, everyone)) << set.logs();

    to_2.black_hole(Relay::Way::forth);
    to_0.black_hole(Relay::Way::back);
    const auto cut = Clock::now();
    ASSERT_TRUE(set.all_report(set_on, lost_peers({2}), 10s)) << set.logs();
    ASSERT_TRUE(set.all_report({2}, lost_peers(set_on), 10s)) << set.logs();
    std::printf("one-way loss 0 -> 2: rank 2 out for the whole set after %.3f s\n",
                std::chrono::duration<double>(Clock::now() - cut).count());
    for (const Rank rank : {1, 3}) {
        const std::string metrics = test::http_get(set.http_port(static_cast<Rank>(rank)), "/metrics")->body;
        EXPECT_NE(metrics.find("eb_transport_errors_total{kind=\"excluded\"} 1\n"), std::string::npos)
            << "rank " << rank << " lost 2 by the proposal it followed\n" << metrics;
    }
    ASSERT_TRUE(all_go_on(set, set_on, "next_event")) << "the set cycles on\n" << set.logs();
    EXPECT_TRUE(set.all_report(everyone, R"("state":"RUNNING")", 0ms)) << set.logs();

    const std::uint64_t next_event = stop_everyone(set, 0);
    for (const Rank rank : set_on) EXPECT_EQ(set.number(rank, "next_event"), next_event) << rank;
    EXPECT_EQ(set.totals(everyone).incomplete, 0u);
    expect_every_event_counted_once(set, next_event);
    expect_no_error(set);
}

// Bytes changed on their way to rank 2 (one in every 20011 of what ranks 0,
// 1 and 3 send it): rank 2 checks every MEP byte for byte and finds the
// damage; no damaged event is counted as built, a damaged cycle message (its
// CRC) breaks that link instead of putting anyone in ERROR, and every event
// is counted once.
TEST(Faults, BytesChangedOnTheDataWireAreFoundAndNeverCountedAsBuilt) {
    Controlled_set set(4, Controlled_set::all_ranks(4), {"--peer-timeout-ms", "1000"});
    const std::set<Rank> everyone = set.ranks();
    Relay to_2(set.data_port(2));
    ASSERT_TRUE(set.all_answer()) << set.logs();
    for (const Rank rank : everyone) {
        std::string body = set.configure_body(rank, 1, everyone);
        if (rank != 2) body = through_relay(body, set, 2, to_2);
        ASSERT_EQ(set.command(rank, "configure", body).status, 200) << rank;
    }
    set.command_all("start");
    ASSERT_TRUE(all_go_on(set, everyone)) << set.logs();

    to_2.corrupt(Relay::Way::forth, 20011);
    ASSERT_TRUE(test::eventually([&] { return set.number(2, "events_incomplete") >= 20; }, 20s))
        << "rank 2 finds the damage\n" << set.logs();
    to_2.corrupt(Relay::Way::forth, 0);
    const std::string status = set.status(2);
    const std::size_t lost_at = status.find("\"lost_peers\"");
    std::printf("%lu bytes changed on the way to rank 2; it found %lu events damaged; %s\n", to_2.bytes_corrupted(),
                set.number(2, "events_incomplete"), status.substr(lost_at, status.find(']', lost_at) + 1 - lost_at).c_str());
    for (const Rank rank : {0, 1, 3})
        EXPECT_EQ(set.number(static_cast<Rank>(rank), "events_incomplete"), 0u) << "nothing changed on its way";

    const std::uint64_t next_event = stop_everyone(set, 0);
    expect_every_event_counted_once(set, next_event);
    expect_no_error(set);
}

// Over verbs, faults of the queue pairs themselves, injected by rank 2
// into its own traffic with rank 0 (--inject-fault, real queue pairs in real
// states): its data queue pair moved to the error state mid-cycle, a receive
// posted and rank 0's MFP on its way (rank 2's receive flushes; rank 0's
// send meets a queue pair that answers nothing, the QP timeout path), or an
// MFP sent 8 bytes short of what its header announced (rank 0 finds the
// size). Either way the set loses the link 0-2: the lost peer is named, rank
// 2 goes out for the whole set (of two units that lost each other, the
// higher rank), the others cycle on, no MEP with a damaged slot is counted
// built (every consumer checks every event), and every event is counted once.
class InjectedVerbsFault : public testing::TestWithParam<const char*> {};

TEST_P(InjectedVerbsFault, LosesTheLinkNamesThePeerAndTheSetBuildsOnIntact) {
    if (!test::over_verbs())
        GTEST_SKIP() << "verbs only (--inject-fault acts on queue pairs); make test-verbs runs it";
    Controlled_set set(4, {0, 1, 3}, {"--peer-timeout-ms", "1000", "--output", "check"});
    set.start(2, {"--inject-fault", std::string(GetParam()) + ":0:20"});
    const std::set<Rank> everyone = set.ranks(), set_on = {0, 1, 3};
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, everyone);
    set.command_all("start");

    ASSERT_TRUE(set.all_report(set_on, lost_peers({2}), 20s)) << set.logs();
    ASSERT_TRUE(set.all_report({2}, lost_peers(set_on), 10s)) << set.logs();
    EXPECT_NE(set.process(2).log().find("injected fault (--inject-fault)"), std::string::npos) << set.logs();
    // The first unit to see it names the peer and why.
    for (const Rank rank : {0, 2}) {
        const std::string log = set.process(rank).log();
        const std::size_t at = log.find("lost rank " + std::to_string(2 - rank));
        if (at != std::string::npos)
            std::printf("%s, rank %u: %s\n", GetParam(), rank, log.substr(at, log.find('\n', at) - at).c_str());
    }
    // Without rank 2's MFPs every MEP is dropped (--incomplete drop), and counted.
    ASSERT_TRUE(all_go_on(set, set_on, "next_event")) << "the set cycles on\n" << set.logs();
    EXPECT_TRUE(set.all_report(everyone, R"("state":"RUNNING")", 0ms)) << set.logs();

    const std::uint64_t next_event = stop_everyone(set, 0);
    for (const Rank rank : set_on) EXPECT_EQ(set.number(rank, "next_event"), next_event) << rank;
    EXPECT_EQ(set.totals(everyone).incomplete, 0u) << "no damaged MEP delivered";
    EXPECT_GT(set.totals(everyone).dropped, 0u) << "the chunks built without rank 2";
    expect_every_event_counted_once(set, next_event);
    expect_no_error(set);
}

INSTANTIATE_TEST_SUITE_P(Faults, InjectedVerbsFault, testing::Values("qp-error", "short-mfp"),
                         [](const auto& fault) { return fault.param == std::string("qp-error") ? "QpError" : "ShortMfp"; });

// 100 idle and 100 garbage connections on each port of rank 1, and a client
// that connects, sends garbage and leaves, over and over, all from another
// host (127.0.0.2) while the set builds: the probes are answered (the
// control port keeps 16 of that host's connections and closes the rest), the set builds on, the stray data
// connections are refused and counted (protocol, slow) when the units next
// connect, which they do not hold up, and nothing is lost.
TEST(Faults, AConnectionStormOnTheControlAndDataPortsLeavesTheSetBuilding) {
    Controlled_set set(3);
    const std::set<Rank> everyone = set.ranks();
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, everyone);
    set.command_all("start");
    ASSERT_TRUE(all_go_on(set, everyone)) << set.logs();

    constexpr int each = 100;
    const std::string garbage(512, 'x');
    std::vector<Fd> storm;
    for (const std::uint16_t port : {set.http_port(1), set.data_port(1)})
        for (int i = 0; i < 2 * each; ++i) {
            storm.push_back(test::connect_to(port, stray_address));
            ASSERT_TRUE(storm.back()) << "connection " << i << " to port " << port;
            if (i % 2 == 1) ::send(storm.back().get(), garbage.data(), garbage.size(), MSG_NOSIGNAL);
        }
    std::atomic<std::uint64_t> churned{0};
    std::jthread churn([&](std::stop_token stop) {
        while (!stop.stop_requested()) {
            const Fd fd = test::connect_to(set.http_port(1), stray_address);
            ::send(fd.get(), garbage.data(), garbage.size(), MSG_NOSIGNAL);
            ++churned;
        }
    });
    std::vector<double> latencies_ms;
    for (int probe = 0; probe < 20; ++probe) {
        const auto sent = Clock::now();
        const auto reply = test::http_get(set.http_port(1), "/healthz");
        latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
        ASSERT_TRUE(reply && reply->status == 200) << "probe " << probe << " after " << churned << " short connections\n" << set.logs();
        EXPECT_LT(latencies_ms.back(), 1000.0) << "probe " << probe << ": the liveness probe's timeout is 3 s";
        std::this_thread::sleep_for(50ms);  // probes spread over a second of storm
    }
    std::sort(latencies_ms.begin(), latencies_ms.end());
    std::printf("healthz with %d idle and %d garbage connections on each port and %lu short ones: median %.2f ms, "
                "max %.2f ms\n",
                each, each, churned.load(), latencies_ms[latencies_ms.size() / 2], latencies_ms.back());
    EXPECT_TRUE(all_go_on(set, everyone)) << "the set builds on\n" << set.logs();
    churn.request_stop();
    churn.join();

    // The data port takes dials while the unit connects: at the next start.
    ASSERT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report(everyone, test::stopped, 10s)) << set.logs();
    const auto started = Clock::now();
    set.command_all("start");
    ASSERT_TRUE(set.all_report(everyone, R"("activity":"building")", 10s)) << set.logs();
    const double start_seconds = std::chrono::duration<double>(Clock::now() - started).count();
    std::printf("start with %d stray data connections waiting: building after %.3f s\n", 2 * each, start_seconds);
    EXPECT_LT(start_seconds, 5.0) << "stray dials are refused beside the set's, not one after the other";
    std::string refusals;
    EXPECT_TRUE(test::eventually([&] {
        const std::string status = set.status(1);
        refusals = status.substr(status.find("\"data_refusals\""));
        return test::json_number(refusals, "protocol").value_or(0) >= each &&
               test::json_number(refusals, "slow").value_or(0) >= each;
    }, 10s)) << refusals << "\n" << set.logs();
    ASSERT_TRUE(all_go_on(set, everyone)) << set.logs();
    EXPECT_TRUE(set.all_report(everyone, R"("lost_peers":[])", 0ms)) << set.logs();
    const std::string log = set.process(1).log();
    std::size_t refusal_lines = 0;
    for (std::size_t at = 0; (at = log.find("dropped a data connection", at)) != std::string::npos; ++at) ++refusal_lines;
    EXPECT_LE(refusal_lines, 5u) << "a storm is counted, not logged line by line\n" << log;

    const std::uint64_t next_event = stop_everyone(set, 0);
    const auto totals = set.totals(everyone);
    EXPECT_EQ(totals.dropped + totals.incomplete, 0u) << "nothing lost";
    expect_every_event_counted_once(set, next_event);
    expect_no_error(set);
}

// Units killed outright and restarted, one after another, the set's leader
// among them: each restarted process rejoins the running set under a new
// epoch, and over all the rounds every event is built once or counted
// dropped.
TEST(Faults, UnitsKilledAndRestartedRoundAfterRoundRejoinAndEveryEventIsCountedOnce) {
    Controlled_set set(4);
    const std::set<Rank> everyone = set.ranks();
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, everyone);
    set.command_all("start");
    ASSERT_TRUE(all_go_on(set, everyone)) << set.logs();

    Controlled_set::Totals killed;
    std::uint64_t epoch = 1;
    for (const Rank victim : {1, 3, 0, 2}) {
        SCOPED_TRACE("victim " + std::to_string(victim));
        const std::set<Rank> others = without(everyone, victim);
        killed += set.kill_while_paused(victim);
        ASSERT_TRUE(set.all_report(others, lost_peers({victim}), 3s)) << set.logs();
        set.start(victim);
        ASSERT_TRUE(set.all_answer()) << set.logs();
        ++epoch;
        set.configure({victim}, epoch, everyone);
        ASSERT_EQ(set.command(victim, "start").status, 200);
        set.configure(others, epoch, everyone);
        ASSERT_TRUE(set.all_report(everyone, "\"epoch\":" + std::to_string(epoch) + ",\"pending_epoch\":0", 20s))
            << set.logs();
        ASSERT_TRUE(set.all_report(everyone, lost_peers({}), 10s)) << set.logs();
        ASSERT_TRUE(all_go_on(set, everyone)) << set.logs();
    }

    const std::uint64_t next_event = stop_everyone(set, 0);
    const auto totals = set.totals(everyone);
    EXPECT_EQ(totals.incomplete, 0u);
    EXPECT_GT(totals.dropped, 0u) << "what the set built while a unit was gone";
    for (const Rank rank : everyone) EXPECT_EQ(set.parse_errors(rank), 0u) << "rank " << rank;
    EXPECT_EQ(totals.in_doubt, 0u) << "killed while paused: no chunk in doubt";
    expect_every_event_counted_once(set, next_event, killed);
    expect_no_error(set);
}

// Half the set hangs (its worker paused) and wakes to find the others gone,
// as they lost it; the operator resets the woken half and configures it
// back at a new epoch, and, while that switch is under way, publishes one
// more (a later poll's table). The joins must not storm: every unit at the
// last epoch, none lost, within a few seconds, and no unit of one half
// given up on by a unit of the other more than once (a join timed out, a
// join from another place in the event stream, or a joiner passed over for
// taking epoch 3 before the set switched to 2:
// ASwitchPassesOverAJoinerAlreadyOnALaterTable). The counts are per peer:
// one join given up on with both joiners counts 2.
TEST(Faults, AResetHalfRejoiningWhileTheSetSwitchesEpochsJoinsWithoutAStorm) {
    Controlled_set set(4, Controlled_set::all_ranks(4), {"--peer-timeout-ms", "1000", "--join-timeout-ms", "2000"});
    const std::set<Rank> everyone = set.ranks(), hung = {2, 3}, running = {0, 1};
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, everyone);
    set.command_all("start");
    ASSERT_TRUE(all_go_on(set, everyone)) << set.logs();

    for (const Rank rank : hung) set.process(rank).signal(SIGSTOP);
    ASSERT_TRUE(set.all_report(running, lost_peers(hung), 5s)) << "a quorum builds on\n" << set.logs();
    ASSERT_TRUE(all_go_on(set, running, "next_event")) << "the running half builds on\n" << set.logs();
    for (const Rank rank : hung) set.process(rank).signal(SIGCONT);
    // Woken, each finds the running half gone: half the set, without rank
    // 0, is no quorum, so it puts itself out (no second set counting).
    for (const Rank rank : hung)
        ASSERT_TRUE(set.all_report({rank}, lost_peers(without(everyone, rank)), 10s)) << set.logs();

    const auto reset = Clock::now();
    for (const Rank rank : hung) ASSERT_EQ(set.command(rank, "reset").status, 200) << rank;
    ASSERT_TRUE(set.all_report(hung, R"("activity":"idle")", 10s)) << set.logs();
    set.configure(hung, 2, everyone);
    for (const Rank rank : hung) ASSERT_EQ(set.command(rank, "start").status, 200) << rank;
    set.configure(running, 2, everyone);
    set.configure(everyone, 3, everyone);  // the next table, before epoch 2 is done with
    ASSERT_TRUE(set.all_report(everyone, R"("epoch":3,"pending_epoch":0)", 20s)) << set.logs();
    ASSERT_TRUE(set.all_report(everyone, lost_peers({}), 10s)) << set.logs();
    ASSERT_TRUE(all_go_on(set, everyone)) << set.logs();
    const double whole = std::chrono::duration<double>(Clock::now() - reset).count();

    std::uint64_t given_up = 0;
    for (const Rank rank : everyone) {
        for (const char* kind : {"join_timeout", "out_of_step", "later_epoch"}) {
            const std::uint64_t count = transport_errors(set, rank, kind);
            EXPECT_LE(count, hung.size()) << "rank " << rank << " gave up on " << count << " joiners (" << kind
                                          << ")\n" << set.logs();
            given_up += count;
        }
    }
    std::printf("woken half reset, configured at epoch 2 and 3 during the switch: every unit building at epoch 3 "
                "%.3f s after the reset, %lu joiners given up on in all\n",
                whole, given_up);
    EXPECT_LT(whole, 15.0);
    const std::uint64_t next_event = stop_everyone(set, 0);
    expect_every_event_counted_once(set, next_event);
    expect_no_error(set);
}

// Whether every rank of `ranks` reports rank table `epoch` and `activity`
// within 10 s.
bool all_at(const Controlled_set& set, const std::set<Rank>& ranks, int epoch, std::string_view activity) {
    const std::string at_epoch = "\"epoch\":" + std::to_string(epoch) + ",",
                      doing = "\"activity\":\"" + std::string(activity) + "\"";
    return test::eventually(
        [&] {
            for (const Rank rank : ranks) {
                const std::string status = set.status(rank);
                if (status.find(at_epoch) == std::string::npos || status.find(doing) == std::string::npos) return false;
            }
            return true;
        },
        10s);
}

// Starts every unit of `set` at epoch 1, sees it build, then hangs `hung`
// (SIGSTOP: its kernel still accepts dials) until the others lose it.
::testing::AssertionResult build_then_hang(Controlled_set& set, Rank hung) {
    const std::set<Rank> everyone = set.ranks();
    if (!set.all_answer()) return ::testing::AssertionFailure() << set.logs();
    set.configure_all(1, everyone);
    set.command_all("start");
    if (!all_go_on(set, everyone)) return ::testing::AssertionFailure() << "the set does not build\n" << set.logs();
    set.process(hung).signal(SIGSTOP);
    if (!set.all_report(without(everyone, hung), lost_peers({hung}), 5s))
        return ::testing::AssertionFailure() << "rank " << hung << " hung, not lost\n" << set.logs();
    return ::testing::AssertionSuccess();
}

// A set of 4 whose ranks 0-2 switch to epoch 2, which takes rank 3 back
// while rank 3 hangs (SIGSTOP, its kernel accepting its dials): the switch
// dials it and waits out the join timeout (3 s) before giving up on it.
// Returns once rank 1 is in that wait; the test acts on it there.
class SetSwitchingToAHungJoiner : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(build_then_hang(set, 3));
        set.configure(running, 2, everyone);
        ASSERT_TRUE(all_at(set, {1}, 2, "connecting")) << "rank 1 switches to epoch 2 and dials rank 3\n" << set.logs();
    }

    // Only rank 3 lost, twice: stopped, then not answering the switch.
    void expect_only_the_hung_joiner_lost() {
        for (const Rank rank : running)
            for (const char* kind : {"closed", "reset", "timeout", "error", "join_timeout", "out_of_step", "excluded"})
                EXPECT_EQ(transport_errors(set, rank, kind), std::string_view(kind).ends_with("timeout") ? 1u : 0u)
                    << "rank " << rank << ": peers lost (" << kind << ")\n" << set.logs();
    }

    Controlled_set set{4, Controlled_set::all_ranks(4), {"--peer-timeout-ms", "1000", "--join-timeout-ms", "3000"}};
    const std::set<Rank> everyone = set.ranks(), running = {0, 1, 2};
};

// Configured then, the unit holds the new table for the set's next switch.
// It once took the switch's connecting for a session not yet in a set and
// connected again under the new table: its peers lost it, and where all did
// so at once the chunks cycled meanwhile were counted by no one (the
// reset-half test's CI failure: 800 events counted nowhere).
TEST_F(SetSwitchingToAHungJoiner, AUnitConfiguredThenStaysInTheSet) {
    set.configure({1}, 3, running);
    ASSERT_TRUE(all_at(set, {0, 2}, 2, "building")) << "rank 3 given up on after the join timeout\n" << set.logs();
    set.configure({0, 2}, 3, running);
    ASSERT_TRUE(set.all_report(running, R"("epoch":3,"pending_epoch":0)", 10s)) << set.logs();
    ASSERT_TRUE(all_go_on(set, running)) << set.logs();
    expect_only_the_hung_joiner_lost();

    set.process(3).signal(SIGCONT);
    const std::uint64_t next_event = stop_everyone(set, 0);
    expect_every_event_counted_once(set, next_event);
    expect_no_error(set);
}

// Stopped then, the unit votes the stop in the first cycle after the switch
// and the set stops with it at one chunk. It once stopped at once, as a
// unit still connecting does: its peers lost it and built on.
TEST_F(SetSwitchingToAHungJoiner, AUnitStoppedThenStopsTheSetWithIt) {
    ASSERT_EQ(set.command(1, "stop").status, 200);
    ASSERT_TRUE(set.all_report(running, test::stopped, 10s)) << "the set stops together\n" << set.logs();
    const std::uint64_t next_event = set.number(1, "next_event");
    for (const Rank rank : running) EXPECT_EQ(set.number(rank, "next_event"), next_event) << rank;
    expect_only_the_hung_joiner_lost();

    set.process(3).signal(SIGCONT);
    EXPECT_EQ(stop_the_others(set, 1), next_event);
    expect_every_event_counted_once(set, next_event);
    expect_no_error(set);
}

// A set of 4 switches to epoch 2, which takes rank 3 back, while rank 3
// (reset after a hang) holds epoch 3 already: the operator published two
// tables and the joiner took the newer at once. Epochs only go forward, so
// rank 3 never takes a dial at epoch 2: the switch passes it over at once
// (later_epoch) instead of stalling the set for the join timeout (20 s
// here), and the switch to epoch 3 takes it in. Before, every unit waited
// the whole join timeout (the reset-half test's CI failure on verbs: rank 1
// gave up on both joiners after 2 s, the set stalled meanwhile).
TEST(Faults, ASwitchPassesOverAJoinerAlreadyOnALaterTable) {
    Controlled_set set(4, Controlled_set::all_ranks(4), {"--peer-timeout-ms", "1000", "--join-timeout-ms", "20000"});
    const std::set<Rank> everyone = set.ranks(), running = {0, 1, 2};
    ASSERT_TRUE(build_then_hang(set, 3));
    set.process(3).signal(SIGCONT);
    ASSERT_TRUE(set.all_report({3}, lost_peers(running), 10s)) << set.logs();
    ASSERT_EQ(set.command(3, "reset").status, 200);
    ASSERT_TRUE(set.all_report({3}, R"("activity":"idle")", 10s)) << set.logs();
    set.configure({3}, 3, everyone);
    ASSERT_EQ(set.command(3, "start").status, 200);

    const auto configured = Clock::now();
    set.configure(running, 2, everyone);
    ASSERT_TRUE(all_at(set, running, 2, "building")) << "the switch to epoch 2 does not wait for rank 3\n"
                                                      << set.logs();
    std::printf("switch to epoch 2 past a joiner on epoch 3: building %.3f s after the configure (join timeout 20 s)\n",
                std::chrono::duration<double>(Clock::now() - configured).count());
    ASSERT_TRUE(set.all_report(running, lost_peers({3}), 0ms)) << set.logs();
    for (const Rank rank : running) {
        EXPECT_EQ(transport_errors(set, rank, "later_epoch"), 1u) << "rank " << rank << "\n" << set.logs();
        EXPECT_EQ(transport_errors(set, rank, "join_timeout"), 0u) << "rank " << rank << "\n" << set.logs();
    }

    set.configure(running, 3, everyone);
    ASSERT_TRUE(set.all_report(everyone, R"("epoch":3,"pending_epoch":0)", 20s)) << set.logs();
    ASSERT_TRUE(set.all_report(everyone, lost_peers({}), 10s)) << set.logs();
    ASSERT_TRUE(all_go_on(set, everyone)) << set.logs();
    const std::uint64_t next_event = stop_everyone(set, 0);
    expect_every_event_counted_once(set, next_event);
    expect_no_error(set);
}

// An Unfolded set whose lowest rank, the one the set follows, runs only a
// BU: a BU killed there has its chunks counted dropped by that rank, which
// has no RU of its own, and every event is counted once.
TEST(Faults, AKilledBuOfAnUnfoldedSetIsCountedByALeaderThatRunsOnlyABu) {
    Controlled_set set(4);
    const std::vector<std::string> functions{"BU", "RU", "BU", "RU"};
    ASSERT_TRUE(set.all_answer()) << set.logs();
    set.configure_all(1, "Unfolded", functions);
    set.command_all("start");
    ASSERT_TRUE(all_go_on(set, {0, 2})) << set.logs();

    const Controlled_set::Totals killed = set.kill_while_paused(2);
    ASSERT_TRUE(set.all_report({0, 1, 3}, lost_peers({2}), 3s)) << set.logs();
    const std::uint64_t dropped = set.number(0, "events_dropped");
    ASSERT_TRUE(test::eventually([&] { return set.number(0, "events_dropped") > dropped + 10 * packing_factor; }, 10s))
        << "rank 0 counts rank 2's chunks\n" << set.logs();
    for (const Rank ru : {1, 3}) EXPECT_EQ(set.number(static_cast<Rank>(ru), "events_dropped"), 0u) << ru;

    EXPECT_EQ(set.command(0, "stop").status, 200);
    ASSERT_TRUE(set.all_report({0, 1, 3}, test::stopped, 10s)) << set.logs();
    const std::uint64_t next_event = set.number(0, "next_event");
    const auto totals = set.totals({0, 1, 3});
    EXPECT_EQ(totals.incomplete, 0u);
    EXPECT_EQ(totals.built + killed.built + totals.dropped + killed.dropped, next_event) << set.logs();
}

}  // namespace
}  // namespace eb
