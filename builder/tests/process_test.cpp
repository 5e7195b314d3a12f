// Runs real eb-builder processes on 127.0.0.1 and watches them over HTTP, as
// Kubernetes probes and Prometheus would.

#include <signal.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "rank.hpp"
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
    std::uint64_t events_built = 0;
    std::uint64_t events_incomplete = 0;
    std::uint64_t meps_built = 0;
    std::uint64_t bytes_built = 0;
    std::string last_error;
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
        processes_[rank] = std::make_unique<Child>(builder_exe, args, dir_ + "/rank-" + std::to_string(rank) + ".log");
    }
    void start_all() {
        for (Rank rank = 0; rank < units(); ++rank) start(rank);
    }

    Child& process(Rank rank) { return *processes_[rank]; }
    std::uint16_t http_port(Rank rank) const { return http_ports_[rank]; }

    std::optional<Unit_view> status(Rank rank) const {
        const auto reply = test::http_get(http_ports_[rank], "/status");
        if (!reply || reply->status != 200) return std::nullopt;
        Unit_view view;
        view.state = test::json_string(reply->body, "state").value_or("?");
        view.events_built = test::json_number(reply->body, "events_built").value_or(0);
        view.events_incomplete = test::json_number(reply->body, "events_incomplete").value_or(0);
        view.meps_built = test::json_number(reply->body, "meps_built").value_or(0);
        view.bytes_built = test::json_number(reply->body, "bytes_built").value_or(0);
        view.last_error = test::json_string(reply->body, "last_error").value_or("?");
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
bool running_and_building(const Unit_view& unit) { return unit.state == "RUNNING" && unit.meps_built > 0; }

// The counts of a unit's last log line, "stopped: B events built, I
// incomplete, M MEPs, ...".
struct Final_counts {
    std::uint64_t built = 0, incomplete = 0, meps = 0;
};
std::optional<Final_counts> final_counts(const std::string& log) {
    const std::size_t at = log.rfind("stopped: ");
    if (at == std::string::npos) return std::nullopt;
    Final_counts counts;
    if (std::sscanf(log.c_str() + at, "stopped: %lu events built, %lu incomplete, %lu MEPs", &counts.built,
                    &counts.incomplete, &counts.meps) != 3)
        return std::nullopt;
    return counts;
}

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
    }
}

INSTANTIATE_TEST_SUITE_P(Units, ClusterOfSize, testing::Values(1u, 3u, 4u),
                         [](const auto& size) { return std::to_string(size.param) + "Units"; });

TEST_F(ProcessTest, EndpointsAnswerOverHttp) {
    Cluster& cluster = make_cluster(1);
    cluster.start_all();
    ASSERT_TRUE(eventually([&] { return cluster.all(running_and_building); }, 20s));
    const std::uint16_t port = cluster.http_port(0);

    const auto status = test::http_get(port, "/status");
    ASSERT_TRUE(status);
    EXPECT_TRUE(status->body.starts_with(R"({"rank":0,"units":1,"state":"RUNNING","events_built":)")) << status->body;

    const auto metrics = test::http_get(port, "/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200);
    for (const char* line : {"# TYPE eb_events_built_total counter\neb_events_built_total ",
                             "# TYPE eb_events_incomplete_total counter\neb_events_incomplete_total 0\n",
                             "# TYPE eb_meps_built_total counter\n", "# TYPE eb_bytes_built_total counter\n",
                             "# TYPE eb_up gauge\neb_up 1\n"})
        EXPECT_NE(metrics->body.find(line), std::string::npos) << line;

    const auto health = test::http_get(port, "/healthz");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    EXPECT_EQ(health->body, "ok\n");

    const auto unknown = test::http_get(port, "/nope");
    ASSERT_TRUE(unknown);
    EXPECT_EQ(unknown->status, 404);
    stop_all_and_expect_clean_exit(cluster);
}

TEST_F(ProcessTest, WaitsInConnectingUntilItsPeerAppears) {
    Cluster& cluster = make_cluster(2);
    cluster.start(0);
    ASSERT_TRUE(eventually([&] { return cluster.status(0).has_value(); }, 10s));
    EXPECT_EQ(cluster.status(0)->state, "CONNECTING");
    EXPECT_EQ(cluster.status(0)->events_built, 0u);

    cluster.start(1);
    ASSERT_TRUE(eventually([&] { return cluster.all(running_and_building); }, 20s));
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

TEST_F(ProcessTest, PeerFailureShowsAsErrorUntilStopped) {
    Cluster& cluster = make_cluster(2);
    cluster.start_all();
    ASSERT_TRUE(eventually([&] { return cluster.all(running_and_building); }, 20s));
    cluster.process(1).signal(SIGKILL);
    ASSERT_TRUE(eventually(
        [&] {
            const auto unit = cluster.status(0);
            return unit && unit->state == "ERROR" && unit->last_error.find("rank 1") != std::string::npos;
        },
        10s));
    const auto metrics = test::http_get(cluster.http_port(0), "/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("\neb_up 0\n"), std::string::npos);
    cluster.process(0).signal(SIGTERM);
    EXPECT_EQ(cluster.process(0).wait_exit(1s), 0);
}

TEST_F(ProcessTest, BadUsageExitsWithCode2NamingTheFlag) {
    const std::string dir = test::make_temp_dir();
    Child bad(builder_exe, {"--rank", "1", "--peers", "127.0.0.1:9000"}, dir + "/bad.log");
    EXPECT_EQ(bad.wait_exit(10s), 2);
    EXPECT_NE(bad.log().find("--rank 1 is out of range"), std::string::npos) << bad.log();

    Child help(builder_exe, {"--help"}, dir + "/help.log");
    EXPECT_EQ(help.wait_exit(10s), 0);
    EXPECT_NE(help.log().find("Usage: eb-builder --rank R --peers"), std::string::npos);
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

}  // namespace
}  // namespace eb
