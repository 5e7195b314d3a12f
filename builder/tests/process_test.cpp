// Runs real eb-builder processes on 127.0.0.1 and watches them over HTTP, as
// Kubernetes probes and Prometheus would.

#include <sched.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>

#include "base/rank.hpp"
#include "test_support.hpp"

namespace eb {
namespace {

using namespace std::chrono_literals;
using test::Child;
using test::eventually;

const std::string builder_exe = EB_BUILDER_EXE;

// What the tests read from GET /status.
struct Unit_view {
    std::string state;
    std::string activity;
    std::uint64_t events_built = 0;
    std::uint64_t events_incomplete = 0;
    std::uint64_t events_dropped = 0;
    std::uint64_t meps_built = 0;
    std::uint64_t bytes_built = 0;
    std::string last_error;
    std::string body;  // the whole JSON, for the arrays (peers, lost_peers)
};

// N units, one process each, on free ports of 127.0.0.1.
class Cluster {
public:
    explicit Cluster(Rank units, std::vector<std::string> extra_args = {})
        : data_ports_(test::free_ports(2 * units)),  // one go, so none coincide
          http_ports_(data_ports_.begin() + units, data_ports_.end()),
          extra_args_(std::move(extra_args)),
          dir_(test::make_temp_dir()),
          processes_(units) {
        data_ports_.resize(units);
        for (const std::uint16_t port : data_ports_)
            peers_ += (peers_.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(port);
    }
    ~Cluster() {
        processes_.clear();  // kills what still runs before its logs go
        std::filesystem::remove_all(dir_);
    }

    Rank units() const { return static_cast<Rank>(processes_.size()); }

    void start(Rank rank) {
        std::vector<std::string> args = {"--rank", std::to_string(rank), "--peers", peers_, "--http-port",
                                         std::to_string(http_ports_[rank])};
        args.insert(args.end(), extra_args_.begin(), extra_args_.end());
        const std::vector<std::string> transport = test::transport_flags();
        args.insert(args.end(), transport.begin(), transport.end());
        processes_[rank] = std::make_unique<Child>(builder_exe, args, dir_ + "/rank-" + std::to_string(rank) + ".log");
    }
    void start_all() {
        for (Rank rank = 0; rank < units(); ++rank) start(rank);
    }

    Child& process(Rank rank) { return *processes_[rank]; }
    std::uint16_t http_port(Rank rank) const { return http_ports_[rank]; }

    // The body of GET /metrics, or "" if the unit does not answer.
    std::string metrics(Rank rank) const {
        const auto reply = test::http_get(http_ports_[rank], "/metrics");
        return reply && reply->status == 200 ? reply->body : "";
    }

    std::optional<Unit_view> status(Rank rank) const {
        const auto reply = test::http_get(http_ports_[rank], "/status");
        if (!reply || reply->status != 200) return std::nullopt;
        Unit_view view;
        view.state = test::json_string(reply->body, "state").value_or("?");
        view.activity = test::json_string(reply->body, "activity").value_or("?");
        view.events_built = test::json_number(reply->body, "events_built").value_or(0);
        view.events_incomplete = test::json_number(reply->body, "events_incomplete").value_or(0);
        view.events_dropped = test::json_number(reply->body, "events_dropped").value_or(0);
        view.meps_built = test::json_number(reply->body, "meps_built").value_or(0);
        view.bytes_built = test::json_number(reply->body, "bytes_built").value_or(0);
        view.last_error = test::json_string(reply->body, "last_error").value_or("?");
        view.body = reply->body;
        return view;
    }

    // True when every unit answers and satisfies `condition`.
    bool all(const std::function<bool(const Unit_view&)>& condition) const {
        for (Rank rank = 0; rank < units(); ++rank) {
            const auto view = status(rank);
            if (!view || !condition(*view)) return false;
        }
        return true;
    }

    std::string logs() const {
        std::string text;
        for (Rank rank = 0; rank < units(); ++rank)
            if (processes_[rank]) text += "--- rank " + std::to_string(rank) + " ---\n" + processes_[rank]->log();
        return text;
    }

private:
    std::vector<std::uint16_t> data_ports_;
    std::vector<std::uint16_t> http_ports_;
    std::vector<std::string> extra_args_;
    std::string dir_;
    std::string peers_;
    std::vector<std::unique_ptr<Child>> processes_;
};

// Running and past its first MEP, good or bad: tests then assert on the
// counts instead of waiting out a deadline when every event is incomplete.
bool running_and_building(const Unit_view& unit) {
    return unit.state == "RUNNING" && unit.activity == "building" && unit.meps_built > 0;
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

using test::Final_counts;
using test::final_counts;

// Shows the units' logs when a test fails.
class ProcessTest : public testing::Test {
protected:
    void TearDown() override {
        if (HasFailure() && cluster_) std::cerr << cluster_->logs();
    }
    Cluster& make_cluster(Rank units, std::vector<std::string> extra_args = {}) {
        cluster_ = std::make_unique<Cluster>(units, std::move(extra_args));
        return *cluster_;
    }
    // SIGTERMs every unit at once, as deleting a run would, and expects all to
    // exit with 0 within the one second the builder promises.
    void stop_all_and_expect_clean_exit(Cluster& cluster) {
        for (Rank rank = 0; rank < cluster.units(); ++rank) cluster.process(rank).signal(SIGTERM);
        const auto deadline = std::chrono::steady_clock::now() + 1s;
        for (Rank rank = 0; rank < cluster.units(); ++rank) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            EXPECT_EQ(cluster.process(rank).wait_exit(std::max(left, 0ms)), 0) << "rank " << rank;
        }
    }

private:
    std::unique_ptr<Cluster> cluster_;
};

class ClusterOfSize : public ProcessTest, public testing::WithParamInterface<Rank> {};

TEST_P(ClusterOfSize, EveryUnitBuildsVerifiedEventsUntilSigterm) {
    Cluster& cluster = make_cluster(GetParam());
    cluster.start_all();
    ASSERT_TRUE(eventually([&] { return cluster.all(running_and_building); }, 20s));

    std::vector<std::uint64_t> before;
    for (Rank rank = 0; rank < cluster.units(); ++rank) {
        const auto unit = cluster.status(rank);
        ASSERT_TRUE(unit);
        ASSERT_GT(unit->events_built, 0u) << "rank " << rank << ": " << unit->last_error;
        before.push_back(unit->events_built);
    }
    ASSERT_TRUE(eventually(
        [&] {
            for (Rank rank = 0; rank < cluster.units(); ++rank) {
                const auto unit = cluster.status(rank);
                if (!unit || unit->events_built <= before[rank]) return false;
            }
            return true;
        },
        10s))
        << "events_built must keep increasing";

    for (Rank rank = 0; rank < cluster.units(); ++rank) {
        const auto unit = cluster.status(rank);
        ASSERT_TRUE(unit);
        EXPECT_EQ(unit->events_incomplete, 0u) << "rank " << rank << ": " << unit->last_error;
        EXPECT_EQ(unit->events_dropped, 0u) << "rank " << rank;
        EXPECT_TRUE(contains(unit->body, R"("lost_peers":[])")) << unit->body;
        EXPECT_EQ(unit->last_error, "");
        EXPECT_GT(unit->bytes_built, unit->events_built * 128 * cluster.units()) << "every source's payload";
    }
    stop_all_and_expect_clean_exit(cluster);
    // Exact accounting from the final line: every event of every MEP was
    // checked, none lost (status reads are not atomic with each other).
    for (Rank rank = 0; rank < cluster.units(); ++rank) {
        const auto last = final_counts(cluster.process(rank).log());
        ASSERT_TRUE(last) << "rank " << rank << " logged no final line";
        EXPECT_GT(last->meps, 0u);
        EXPECT_EQ(last->built + last->incomplete, 1000 * last->meps) << "rank " << rank;
        EXPECT_EQ(last->incomplete, 0u) << "rank " << rank;
        EXPECT_GT(last->bytes, last->built * 128 * cluster.units()) << "rank " << rank;
    }
}

INSTANTIATE_TEST_SUITE_P(Units, ClusterOfSize, testing::Values(1u, 3u, 4u),
                         [](const auto& size) { return std::to_string(size.param) + "Units"; });

// SIGTERM votes stop as POST /control/stop does: units signalled one after
// the other stop together at one cycle boundary, so none sees another leave
// first (no loss, nothing dropped) and all built the same number of cycles.
TEST_F(ProcessTest, UnitsSignalledOneAfterAnotherStopTogether) {
    for (int run = 0; run < 5; ++run) {
        SCOPED_TRACE("run " + std::to_string(run));
        Cluster& cluster = make_cluster(4, {"--events", "1000000000"});
        cluster.start_all();
        ASSERT_TRUE(eventually([&] { return cluster.all(running_and_building); }, 20s));
        stop_all_and_expect_clean_exit(cluster);
        std::optional<Final_counts> first;
        for (Rank rank = 0; rank < cluster.units(); ++rank) {
            const std::string log = cluster.process(rank).log();
            const auto last = final_counts(log);
            ASSERT_TRUE(last) << "rank " << rank << " logged no final line";
            EXPECT_EQ(last->dropped, 0u) << "rank " << rank;
            EXPECT_FALSE(contains(log, "lost rank")) << log;
            if (!first) first = last;
            EXPECT_EQ(last->meps, first->meps) << "rank " << rank << " stopped at another cycle";
        }
    }
}

TEST_F(ProcessTest, EndpointsAnswerOverHttp) {
    Cluster& cluster = make_cluster(1);
    cluster.start_all();
    ASSERT_TRUE(eventually([&] { return cluster.all(running_and_building); }, 20s));
    const std::uint16_t port = cluster.http_port(0);

    // Self-configured: epoch 1 from its flags, started at once, building.
    const auto status = test::http_get(port, "/status");
    ASSERT_TRUE(status);
    EXPECT_EQ(status->status, 200);
    EXPECT_TRUE(status->body.starts_with(R"({"rank":0,"units":1,"state":"RUNNING","activity":"building",)"
                                         R"("role":"live","epoch":1,"pending_epoch":0,"next_event":)"))
        << status->body;
    for (const char* part : {R"("events_incomplete":0,"events_dropped":0,"events_in_doubt":0,"meps_built":)",
                             R"("peers":[{"rank":0,"state":"self"}],"lost_peers":[],)",
                             R"("allowed":["configure","pause","stop","reset"],"last_error":""})"})
        EXPECT_TRUE(contains(status->body, part)) << part << " in " << status->body;
    EXPECT_GT(test::json_number(status->body, "events_built").value_or(0), 0u) << status->body;

    const auto metrics = test::http_get(port, "/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200);
    for (const char* line : {"# TYPE eb_events_built_total counter\neb_events_built_total ",
                             "# TYPE eb_events_incomplete_total counter\neb_events_incomplete_total 0\n",
                             "# TYPE eb_events_dropped_total counter\neb_events_dropped_total 0\n",
                             "# TYPE eb_meps_built_total counter\n", "# TYPE eb_bytes_built_total counter\n",
                             "# TYPE eb_peers_lost_total counter\neb_peers_lost_total 0\n",
                             "\neb_state{state=\"RUNNING\"} 1\n", "\neb_state{state=\"ERROR\"} 0\n",
                             "# TYPE eb_epoch gauge\neb_epoch 1\n", "# TYPE eb_up gauge\neb_up 1\n"})
        EXPECT_TRUE(contains(metrics->body, line)) << line;
    EXPECT_FALSE(contains(metrics->body, "eb_peer_up{")) << "a unit alone has no peer";

    const auto health = test::http_get(port, "/healthz");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    EXPECT_EQ(health->body, "ok\n");

    const auto ready = test::http_get(port, "/readyz");
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->status, 200) << ready->body;

    const auto unknown = test::http_get(port, "/nope");
    ASSERT_TRUE(unknown);
    EXPECT_EQ(unknown->status, 404);
    stop_all_and_expect_clean_exit(cluster);
}

// Self-configured, a unit is RUNNING from the start; until its mesh is up its
// activity is "connecting" and so is its missing peer.
TEST_F(ProcessTest, WaitsInConnectingUntilItsPeerAppears) {
    Cluster& cluster = make_cluster(2);
    cluster.start(0);
    ASSERT_TRUE(eventually(
        [&] {
            const auto unit = cluster.status(0);
            return unit && unit->activity == "connecting";
        },
        10s))
        << (cluster.status(0) ? cluster.status(0)->body : "no answer");
    const auto waiting = cluster.status(0);
    ASSERT_TRUE(waiting);
    EXPECT_EQ(waiting->state, "RUNNING");
    EXPECT_EQ(waiting->activity, "connecting") << "rank 1 has not started";
    EXPECT_EQ(waiting->events_built, 0u);
    EXPECT_EQ(waiting->meps_built, 0u);
    EXPECT_TRUE(contains(waiting->body, R"("peers":[{"rank":0,"state":"self"},{"rank":1,"state":"connecting"}])"))
        << waiting->body;
    EXPECT_TRUE(contains(cluster.metrics(0), "\neb_peer_up{peer=\"1\"} 0\n"));

    cluster.start(1);
    ASSERT_TRUE(eventually([&] { return cluster.all(running_and_building); }, 20s));
    for (Rank rank = 0; rank < 2; ++rank) {
        const auto unit = cluster.status(rank);
        ASSERT_TRUE(unit);
        const std::string other = std::to_string(1 - rank);
        EXPECT_TRUE(contains(unit->body, R"({"rank":)" + other + R"(,"state":"up"})")) << unit->body;
        EXPECT_TRUE(contains(cluster.metrics(rank), "\neb_peer_up{peer=\"" + other + "\"} 1\n")) << "rank " << rank;
    }
    stop_all_and_expect_clean_exit(cluster);
}

TEST_F(ProcessTest, StopsPromptlyWhileConnecting) {
    Cluster& cluster = make_cluster(3);
    cluster.start(0);
    ASSERT_TRUE(eventually([&] { return cluster.status(0).has_value(); }, 10s));
    cluster.process(0).signal(SIGTERM);
    EXPECT_EQ(cluster.process(0).wait_exit(1s), 0);
}

// At one event per second the RU waits ~1000 s for its next MFP; SIGTERM
// still ends the unit within the promised second.
TEST_F(ProcessTest, StopsPromptlyWhileWaitingForAPacedSource) {
    Cluster& cluster = make_cluster(1, {"--rate", "1"});
    cluster.start_all();
    ASSERT_TRUE(eventually([&] { return cluster.all(running_and_building); }, 20s));
    stop_all_and_expect_clean_exit(cluster);
}

TEST_F(ProcessTest, StopsByItselfAfterTheRequestedEventsRoundedUpToMeps) {
    Cluster& cluster = make_cluster(3, {"--events", "2500", "--packing-factor", "1000"});
    cluster.start_all();
    for (Rank rank = 0; rank < 3; ++rank) {
        EXPECT_EQ(cluster.process(rank).wait_exit(20s), 0) << "rank " << rank;
        EXPECT_NE(cluster.process(rank).log().find("stopped: 3000 events built, 0 incomplete, 3 MEPs"),
                  std::string::npos);
    }
}

// --output discard assembles MEPs and drops them unchecked (the bench's data
// mover alone): they are counted like delivered ones, with their bytes.
// Also from the prepared source, whose MFPs pass the RU's checks though they
// are made only once.
TEST_F(ProcessTest, DiscardOutputCountsEveryMepItDrops) {
    for (const char* source : {"generator", "prepared"}) {
        Cluster& cluster = make_cluster(2, {"--events", "2000", "--packing-factor", "1000", "--fragment-size", "100",
                                            "--output", "discard", "--source", source});
        cluster.start_all();
        for (Rank rank = 0; rank < 2; ++rank) {
            EXPECT_EQ(cluster.process(rank).wait_exit(20s), 0) << source << " rank " << rank;
            EXPECT_NE(cluster.process(rank).log().find("stopped: 2000 events built, 0 incomplete, 2 MEPs"),
                      std::string::npos)
                << cluster.process(rank).log();
            EXPECT_EQ(cluster.process(rank).log().find(" 0 bytes,"), std::string::npos) << "the MEPs' bytes are counted";
            EXPECT_EQ(cluster.process(rank).log().find("rejected"), std::string::npos) << cluster.process(rank).log();
        }
    }
}

// A peer killed outright (no FIN from its application, only the kernel's
// close) is reported lost within a second, and the unit builds on without
// it: in a 2-unit run every MEP of the survivor misses the dead source, so
// each is dropped and counted, none delivered incomplete (--incomplete drop,
// the default), and the unit stays RUNNING.
TEST_F(ProcessTest, ALostPeerIsReportedWithinASecondAndBuiltAround) {
    Cluster& cluster = make_cluster(2);
    cluster.start_all();
    ASSERT_TRUE(eventually([&] { return cluster.all(running_and_building); }, 20s));
    cluster.process(1).signal(SIGKILL);

    std::optional<Unit_view> at_loss;
    std::string metrics;
    EXPECT_TRUE(eventually(
        [&] {
            at_loss = cluster.status(0);
            if (!at_loss || !contains(at_loss->body, R"("lost_peers":[1])")) return false;
            metrics = cluster.metrics(0);
            return contains(metrics, "\neb_peer_up{peer=\"1\"} 0\n") &&
                   contains(metrics, "\neb_peers_lost_total 1\n");
        },
        1s))
        << "rank 1 not reported lost within 1 s of its death: "
        << (at_loss ? at_loss->body : "no answer") << "\n"
        << metrics;
    ASSERT_TRUE(eventually(
        [&] {
            at_loss = cluster.status(0);
            return at_loss && contains(at_loss->body, R"("lost_peers":[1])");
        },
        10s));
    EXPECT_EQ(at_loss->state, "RUNNING");
    EXPECT_EQ(at_loss->activity, "building");
    EXPECT_TRUE(contains(at_loss->body, R"({"rank":1,"state":"lost"})")) << at_loss->body;
    metrics = cluster.metrics(0);
    EXPECT_TRUE(contains(metrics, "\neb_transport_errors_total{kind=\"closed\"} 1\n") ||
                contains(metrics, "\neb_transport_errors_total{kind=\"reset\"} 1\n"))
        << metrics;
    EXPECT_TRUE(contains(metrics, "\neb_up 1\n")) << metrics;

    // Building goes on: dropped events grow, nothing is delivered incomplete,
    // and at most the one MEP whose data had all arrived before the loss
    // showed is still built.
    std::optional<Unit_view> later;
    ASSERT_TRUE(eventually(
        [&] {
            later = cluster.status(0);
            return later && later->events_dropped > at_loss->events_dropped + 10 * 1000;
        },
        10s))
        << (later ? later->body : "no answer");
    EXPECT_EQ(later->state, "RUNNING");
    EXPECT_EQ(later->events_incomplete, 0u);
    EXPECT_LE(later->events_built, at_loss->events_built + 1000) << "a MEP missing rank 1 was counted as built";
    EXPECT_TRUE(contains(later->body, R"("lost_peers":[1])")) << later->body;
    EXPECT_EQ(later->last_error, "");

    cluster.process(0).signal(SIGTERM);
    EXPECT_EQ(cluster.process(0).wait_exit(1s), 0);
    const auto last = final_counts(cluster.process(0).log());
    ASSERT_TRUE(last) << "no final line";
    EXPECT_EQ(last->incomplete, 0u);
    EXPECT_EQ(last->built, 1000 * last->meps);
    EXPECT_GE(last->dropped, later->events_dropped);
    EXPECT_LE(last->built, at_loss->events_built + 1000);
    EXPECT_TRUE(contains(cluster.process(0).log(), "lost rank 1 (")) << "the loss is logged";
}

// With --incomplete flag the survivor delivers the MEPs that miss the dead
// source, its slot holding missing fragments, and counts their events as
// incomplete, never as built. Only the chunks the dead unit would have built
// are dropped.
TEST_F(ProcessTest, WithIncompleteFlagMepsMissingALostPeerAreDeliveredFlagged) {
    Cluster& cluster = make_cluster(2, {"--incomplete", "flag"});
    cluster.start_all();
    ASSERT_TRUE(eventually([&] { return cluster.all(running_and_building); }, 20s));
    cluster.process(1).signal(SIGKILL);

    std::optional<Unit_view> at_loss;
    ASSERT_TRUE(eventually(
        [&] {
            at_loss = cluster.status(0);
            return at_loss && contains(at_loss->body, R"("lost_peers":[1])");
        },
        10s));
    std::optional<Unit_view> later;
    ASSERT_TRUE(eventually(
        [&] {
            later = cluster.status(0);
            return later && later->events_incomplete > at_loss->events_incomplete + 10 * 1000;
        },
        10s))
        << (later ? later->body : "no answer");
    EXPECT_EQ(later->state, "RUNNING");
    EXPECT_LE(later->events_built, at_loss->events_built + 1000) << "a MEP missing rank 1 was counted as built";
    EXPECT_GT(later->events_dropped, 0u) << "rank 1's own chunks are built nowhere";

    cluster.process(0).signal(SIGTERM);
    EXPECT_EQ(cluster.process(0).wait_exit(1s), 0);
    const auto last = final_counts(cluster.process(0).log());
    ASSERT_TRUE(last) << "no final line";
    EXPECT_EQ(last->built + last->incomplete, 1000 * last->meps) << "every delivered MEP is counted once";
    EXPECT_GE(last->incomplete, later->events_incomplete);
    EXPECT_GT(last->dropped, 0u);
}

TEST_F(ProcessTest, BadUsageExitsWithCode2NamingTheFlag) {
    const std::string dir = test::make_temp_dir();
    Child bad(builder_exe, {"--rank", "1", "--peers", "127.0.0.1:9000"}, dir + "/bad.log");
    EXPECT_EQ(bad.wait_exit(10s), 2);
    EXPECT_NE(bad.log().find("--rank 1 is out of range"), std::string::npos) << bad.log();

    // Without --peers a builder is controlled, so table flags are refused.
    Child dummies(builder_exe, {"--dummies", "1", "--http-port", std::to_string(test::free_ports(1)[0])},
                  dir + "/dummies.log");
    EXPECT_EQ(dummies.wait_exit(10s), 2);
    EXPECT_NE(dummies.log().find("eb-builder: --dummies needs --peers"), std::string::npos) << dummies.log();
    // Controlled, the run's parameters are checked at start as well, not when
    // the first MFP is generated.
    Child poisson(builder_exe, {"--size-model", "poisson", "--fragment-size", "0"}, dir + "/poisson.log");
    EXPECT_EQ(poisson.wait_exit(10s), 2);
    EXPECT_NE(poisson.log().find("--size-model poisson needs a mean of at least 1 byte"), std::string::npos)
        << poisson.log();

    Child help(builder_exe, {"--help"}, dir + "/help.log");
    EXPECT_EQ(help.wait_exit(10s), 0);
    EXPECT_NE(help.log().find("Usage: eb-builder [--rank R] [options]"), std::string::npos) << help.log();
    EXPECT_NE(help.log().find("eb-builder --rank R --peers HOST:PORT,... [options]  (self-configured)"),
              std::string::npos)
        << help.log();
    std::filesystem::remove_all(dir);
}

// A unit counts the CPUs it may use (its affinity, inherited here from a
// thread confined to one CPU): unset, --data-threads follows them; more than
// them fails the start naming the flag and the fix.
TEST_F(ProcessTest, DataThreadsFollowTheCpusAUnitMayUseAndMoreAreRefused) {
    const std::string dir = test::make_temp_dir();
    cpu_set_t all, one;
    ASSERT_EQ(::sched_getaffinity(0, sizeof all, &all), 0);
    CPU_ZERO(&one);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &all)) {
            CPU_SET(cpu, &one);
            break;
        }
    ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);
    // Children inherit the spawning thread's affinity.
    Child refused(builder_exe, {"--data-threads", "2", "--http-port", std::to_string(test::free_ports(1)[0])},
                  dir + "/refused.log");
    Child chosen(builder_exe, {"--http-port", std::to_string(test::free_ports(1)[0])}, dir + "/chosen.log");
    ASSERT_EQ(::sched_setaffinity(0, sizeof all, &all), 0);
    EXPECT_EQ(refused.wait_exit(10s), 1);
    EXPECT_NE(refused.log().find("cannot start: --data-threads 2: this unit may run on 1 CPU"), std::string::npos)
        << refused.log();
    EXPECT_TRUE(eventually([&] { return chosen.log().find(", 1 data threads") != std::string::npos; }, 10s))
        << chosen.log();
    std::filesystem::remove_all(dir);
}

// The source is opened before the mesh: a bad --source-file fails the start
// at once, with its reason, though the peer never comes.
TEST_F(ProcessTest, AnUnreadableSourceFileFailsTheStartWithCode1) {
    Cluster& cluster = make_cluster(2, {"--source", "file", "--source-file", "/nonexistent/eb-source.mfp"});
    cluster.start(0);
    EXPECT_EQ(cluster.process(0).wait_exit(10s), 1);
    EXPECT_NE(cluster.process(0).log().find("cannot start: --source-file /nonexistent/eb-source.mfp: cannot open it"),
              std::string::npos)
        << cluster.process(0).log();
}

TEST_F(ProcessTest, PortInUseFailsTheStartWithCode1) {
    Cluster& cluster = make_cluster(1);
    cluster.start_all();
    ASSERT_TRUE(eventually([&] { return cluster.status(0).has_value(); }, 10s));
    const std::string dir = test::make_temp_dir();
    const auto data_port = test::free_ports(1)[0];
    Child second(builder_exe,
                 {"--rank", "0", "--peers", "127.0.0.1:" + std::to_string(data_port), "--http-port",
                  std::to_string(cluster.http_port(0))},
                 dir + "/second.log");
    EXPECT_EQ(second.wait_exit(10s), 1);
    EXPECT_NE(second.log().find("(--http-port): Address already in use"), std::string::npos) << second.log();
    std::filesystem::remove_all(dir);
    stop_all_and_expect_clean_exit(cluster);
}

// Starts two self-configured units, rank r with `flags(r)` added, and
// returns each one's /status once it holds ERROR ("" if it never did within
// 10 s, which fails the test with the unit's log).
std::vector<std::string> two_units_in_error(const std::function<std::vector<std::string>(Rank)>& flags) {
    const std::string dir = test::make_temp_dir();
    const auto ports = test::free_ports(4);
    const std::string peers = "127.0.0.1:" + std::to_string(ports[0]) + ",127.0.0.1:" + std::to_string(ports[1]);
    std::vector<std::unique_ptr<Child>> units;
    for (const Rank rank : {0u, 1u}) {
        std::vector<std::string> args{"--rank", std::to_string(rank), "--peers", peers, "--http-port",
                                      std::to_string(ports[2 + rank])};
        for (std::string& flag : flags(rank)) args.push_back(std::move(flag));
        units.push_back(std::make_unique<Child>(builder_exe, args, dir + "/rank-" + std::to_string(rank) + ".log"));
    }
    std::vector<std::string> statuses;
    for (const Rank rank : {0u, 1u}) {
        std::string last;
        const bool in_error = eventually(
            [&] {
                const auto status = test::http_get(ports[2 + rank], "/status");
                last = status ? status->body : "";
                return last.find(R"("state":"ERROR")") != std::string::npos;
            },
            10s);
        EXPECT_TRUE(in_error) << "rank " << rank << ": " << last << units[rank]->log();
        statuses.push_back(in_error ? last : "");
    }
    units.clear();
    std::filesystem::remove_all(dir);
    return statuses;
}

// Units of one set that disagree on --transport are told so as they
// connect, before any data moves (no RDMA device is needed to see it).
TEST_F(ProcessTest, UnitsOnDifferentTransportsAreRefusedNamingTheFlag) {
    const auto statuses = two_units_in_error(
        [](Rank rank) { return std::vector<std::string>{"--transport", rank == 0 ? "tcp" : "verbs"}; });
    for (const std::string& status : statuses)
        EXPECT_NE(status.find("every unit of a set needs the same --transport"), std::string::npos) << status;
}

// A verbs unit whose RDMA device is not there holds ERROR naming the device
// (on this host, or with the devices the host has), instead of building.
TEST_F(ProcessTest, AVerbsUnitWithoutItsDeviceHoldsErrorNamingIt) {
    const auto statuses = two_units_in_error(
        [](Rank) { return std::vector<std::string>{"--transport", "verbs", "--rdma-device", "nosuch0"}; });
    for (const std::string& status : statuses) EXPECT_NE(status.find("RDMA device"), std::string::npos) << status;
}

}  // namespace
}  // namespace eb
