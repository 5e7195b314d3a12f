// eb-farm-sim as a user runs it: a process per simulation (SimGrid allows
// one per process), its CSV row read back.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Outcome {
    int status = -1;
    std::string output;
    std::map<std::string, std::string> row;  // column -> value
    double operator[](const std::string& column) const { return std::stod(row.at(column)); }
};

std::string testdata(const std::string& file) { return std::string(EB_SIM_TESTDATA) + "/" + file; }

Outcome farm_sim(const std::string& args) {
    const std::string command = std::string(EB_FARM_SIM) + " --header " + args + " 2>&1";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
    Outcome out;
    char buffer[4096];
    for (std::size_t got; (got = fread(buffer, 1, sizeof buffer, pipe.get())) > 0;) out.output.append(buffer, got);
    out.status = pclose(pipe.release());
    std::vector<std::string> lines;
    std::istringstream in(out.output);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("ranks,", 0) == 0 || (!lines.empty() && lines.back().rfind("ranks,", 0) == 0)) lines.push_back(line);
    if (lines.size() == 2) {
        std::istringstream names(lines[0]), values(lines[1]);
        for (std::string name, value; std::getline(names, name, ',') && std::getline(values, value, ',');) out.row[name] = value;
    }
    return out;
}

double off(double value, double reference) { return std::abs(value - reference) / reference; }

const std::string no_latency = " --nic-latency-us 0 --link-latency-us 0";

// Every endpoint live, no barrier, no jitter: each phase moves one MFP per
// NIC at the NIC's rate, as the analytic model says, within 2 %.
TEST(FarmSim, AllLiveTwoLeavesMoveTheAnalyticThroughput) {
    const Outcome r = farm_sim("--plan " + testdata("all-live-plan.json") +
                               " --barrier none --sizes fixed --packing-factor 30000 --cycles 5");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_LT(off(r["throughput_tbps"], r["analytic_tbps"]), 0.02) << r.output;
    EXPECT_EQ(r["analytic_tbps"], 1.6);  // 8 NICs of 200 Gb/s
}

// Dummies (spares) idle their peers' NICs in some phases: the tournament
// barrier keeps the phases in step, and the throughput is live/(live +
// dummy) of the NICs', within 2 % (no latency, so the barrier costs none).
TEST(FarmSim, DummiesCostTheirShare) {
    const Outcome r = farm_sim("--plan " + testdata("with-spares-plan.json") + " --barrier tournament --sizes fixed --cycles 5" +
                               no_latency);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r["live"], 6);
    EXPECT_LT(off(r["throughput_tbps"], r["analytic_tbps"]), 0.02) << r.output;
    EXPECT_LT(r["analytic_tbps"], 1.6 * 6 / 8 + 1e-9);
}

// Linear shifting keeps every NIC to one flow per direction; two RUs on one
// BU in a phase share its link, and the simulation shows that time.
TEST(FarmSim, AScheduleViolationShowsAsSharedLinkTime) {
    const std::string args = "--plan " + testdata("all-live-plan.json") + " --barrier none --sizes fixed --cycles 2" + no_latency;
    const Outcome kept = farm_sim(args);
    const Outcome broken = farm_sim(args + " --violate-schedule");
    ASSERT_EQ(kept.status, 0) << kept.output;
    ASSERT_EQ(broken.status, 0) << broken.output;
    EXPECT_EQ(kept["shared_link_seconds"], 0) << kept.output;
    EXPECT_GT(broken["shared_link_seconds"], 10e-6) << broken.output;  // a good part of an MFP's 56 us
    EXPECT_LT(broken["throughput_tbps"], kept["throughput_tbps"]);
}

// Without a barrier, ranks whose MFPs differ in size (the detector groups'
// Poisson means) drift apart, and a BU that posted a cycle's receives at
// once takes an MFP from a rank ahead while the one of its phase still
// flows: its NIC carries two. Posting one receive ahead, with a credit,
// keeps every NIC to one flow per direction whatever the drift.
TEST(FarmSim, OneReceiveAheadKeepsEveryNicToOneFlowWithoutABarrier) {
    const std::string args = "--plan " + testdata("all-live-plan.json") + " --barrier none --cycles 20";
    const Outcome cycle_at_once = farm_sim(args);
    const Outcome one_ahead = farm_sim(args + " --receive-window 1");
    ASSERT_EQ(cycle_at_once.status, 0) << cycle_at_once.output;
    ASSERT_EQ(one_ahead.status, 0) << one_ahead.output;
    EXPECT_EQ(cycle_at_once["receive_window"], 0);
    EXPECT_GT(cycle_at_once["shared_link_seconds"], 1e-3) << cycle_at_once.output;
    EXPECT_EQ(one_ahead["shared_link_seconds"], 0) << one_ahead.output;
    EXPECT_GT(one_ahead["throughput_tbps"], 1.05 * cycle_at_once["throughput_tbps"]);
}

// The rank table the operator publishes (the ConfigMap's ranks.json), with
// the fabric's shape, simulates as eb-plan's output for the same run.
TEST(FarmSim, ThePublishedRankTableIsAccepted) {
    const std::string common = " --barrier tournament --cycles 3";
    const Outcome planned = farm_sim("--plan " + testdata("with-spares-plan.json") + common);
    const Outcome published = farm_sim("--table " + testdata("with-spares-ranks.json") +
                                       " --leaves 2 --spines 2 --ports-per-leaf 4 --links-per-pair 2" + common);
    ASSERT_EQ(planned.status, 0) << planned.output;
    ASSERT_EQ(published.status, 0) << published.output;
    EXPECT_EQ(published["throughput_tbps"], planned["throughput_tbps"]);
    EXPECT_EQ(published["event_rate"], planned["event_rate"]);
}

TEST(FarmSim, BadInputIsRefusedByName) {
    struct Case {
        std::string args, says;
    };
    const std::vector<Case> cases = {
        {"", "give --plan, --fabric and --run, --table with the fabric's shape, or --one-switch"},
        {"--plan /nonexistent.json", "/nonexistent.json: cannot be read"},
        {"--table " + testdata("with-spares-ranks.json") + " --leaves 1 --spines 2 --ports-per-leaf 4 --links-per-pair 2",
         "outside the fabric"},
        {"--table " + testdata("with-spares-ranks.json") + " --leaves 2 --spines 2 --ports-per-leaf 4 --links-per-pair 2 --routing Random",
         "routing \"Random\""},
        {"--plan " + testdata("all-live-plan.json") + " --barrier sometimes", "--barrier"},
        {"--plan " + testdata("all-live-plan.json") + " --cycles 0", "--cycles"},
        {"--plan " + testdata("two-leaves-fabric.yaml"), "two-leaves-fabric.yaml: "},
    };
    for (const Case& c : cases) {
        const Outcome r = farm_sim(c.args);
        EXPECT_NE(r.status, 0) << c.args;
        EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << " said:\n" << r.output;
    }
}

}  // namespace
