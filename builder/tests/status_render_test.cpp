#include "telemetry/status_render.hpp"

#include <gtest/gtest.h>

#include "golden.hpp"
#include "app/numa.hpp"
#include "test_support.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace eb {
namespace {

Status_snapshot sample(Control_state state) {
    Status_snapshot status;
    status.rank = 2;
    status.units = 4;
    status.state = state;
    status.activity = "building";
    status.live = true;
    status.epoch = 3;
    status.pending_epoch = 4;
    status.events_built = 123000;
    status.events_incomplete = 7;
    status.events_dropped = 2000;
    status.events_in_doubt = 100;
    status.meps_built = 123;
    status.bytes_built = 70849536;
    status.building_seconds = 2.5;
    status.network_bytes_sent = 53137152;
    status.network_bytes_received = 53137150;
    status.network_seconds = 1.25;
    status.network_sends_held = 96;
    status.network_send_held_seconds = 0.125;
    status.events_per_second = 1.5e6;
    status.bytes_per_second = 2.5e8;
    status.peers = {Link_state::up, Link_state::lost, Link_state::self, Link_state::dummy};
    status.lost_reached = {false, true, false, false};  // rank 1's data port answers its probe again
    status.probing = true;
    status.peers_lost = 1;
    status.link_failures = {0, 1, 0, 0, 0};
    status.refusals = {3, 0, 1, 0, 0};  // 3 wrong keys, 1 misfit
    status.last_error = "rank 1 said \"bye\"\n\tand left\x01";
    status.parse_errors = {0, 0, 5};  // 5 bad_magic
    status.mep_ring_fill = 0.25;
    status.phase_time = Histogram(exponential_bounds(1e-6, 10, 3)).snapshot();
    status.barrier_wait = Histogram(exponential_bounds(1e-6, 10, 3)).snapshot();
    return status;
}

TEST(StatusRender, StatusJsonHasEveryFieldWithEscapedError) {
    EXPECT_EQ(status_json(sample(Control_state::running)),
              R"({"rank":2,"units":4,"state":"RUNNING","activity":"building","role":"live","epoch":3,"pending_epoch":4,"next_event":0,)"
              R"("events_built":123000,"events_incomplete":7,"events_dropped":2000,"events_in_doubt":100,"meps_built":123,"meps_discarded":0,)"
              R"("output_stalled_seconds":0,"bytes_built":70849536,"building_seconds":2.5,"network_bytes_sent":53137152,"network_bytes_received":53137150,)"
              R"("network_seconds":1.25,"network_sends_held":96,"network_send_held_seconds":0.125,)"
              R"("events_per_second":1.5e+06,"bytes_per_second":2.5e+08,)"
              R"("peers":[{"rank":0,"state":"up"},{"rank":1,"state":"lost"},{"rank":2,"state":"self"},)"
              R"({"rank":3,"state":"dummy"}],"lost_peers":[1],"lost_peers_reachable":[1],)"
              R"("data_refusals":{"key":3,"epoch":0,"table":1,"protocol":0,"slow":0},"consumer":null,"numa":null,"transport":{"kind":"tcp"},)"
              R"("allowed":["configure","pause","stop","reset"],)"
              R"("last_error":"rank 1 said \"bye\"\n\tand left\u0001"})");
}

Transport_report verbs_transport() {
    Transport_report transport;
    transport.kind = "verbs";
    transport.device = "rxe0";
    transport.port = 1;
    transport.gid_index = 1;
    transport.port_state = "ACTIVE";
    transport.link_layer = "Ethernet";
    transport.peers = {{0, "RTS"}, {1, "ERR"}};
    return transport;
}

TEST(StatusRender, LostPeersReachableIsNullWhileNoProbeRuns) {
    Status_snapshot status = sample(Control_state::running);
    status.probing = false;  // connecting, or idle between sessions: nothing dials the lost peers
    EXPECT_NE(status_json(status).find(R"("lost_peers":[1],"lost_peers_reachable":null,)"), std::string::npos)
        << status_json(status);
}

TEST(StatusRender, AVerbsTransportShowsDevicePortGidAndEachQueuePair) {
    Status_snapshot status = sample(Control_state::running);
    status.transport = verbs_transport();
    EXPECT_NE(status_json(status).find(
                  R"("transport":{"kind":"verbs","device":"rxe0","port":1,"gid_index":1,"port_state":"ACTIVE",)"
                  R"("link_layer":"Ethernet","peers":[{"rank":0,"qp_state":"RTS"},{"rank":1,"qp_state":"ERR"}]})"),
              std::string::npos)
        << status_json(status);
    const std::string metrics = prometheus_metrics(status);
    for (const char* line : {"eb_transport_info{kind=\"verbs\"} 1\n", "eb_verbs_port_active 1\n",
                             "eb_peer_qp_ready{peer=\"0\"} 1\n", "eb_peer_qp_ready{peer=\"1\"} 0\n"})
        EXPECT_NE(metrics.find(line), std::string::npos) << line;
    status.transport.port_state = "DOWN";
    EXPECT_NE(prometheus_metrics(status).find("eb_verbs_port_active 0\n"), std::string::npos);
}

TEST(StatusRender, StatusJsonNamesEveryStateAndItsCommands) {
    const std::pair<Control_state, const char*> cases[] = {
        {Control_state::not_ready, R"("state":"NOT_READY")"}, {Control_state::ready, R"("state":"READY")"},
        {Control_state::running, R"("state":"RUNNING")"},     {Control_state::paused, R"("state":"PAUSED")"},
        {Control_state::error, R"("state":"ERROR")"}};
    for (const auto& [state, text] : cases) EXPECT_NE(status_json(sample(state)).find(text), std::string::npos) << text;
    EXPECT_NE(status_json(sample(Control_state::error)).find(R"("allowed":["reset"])"), std::string::npos);
}

TEST(StatusRender, MetricsCarryCountersGaugesAndHistograms) {
    const std::string metrics = prometheus_metrics(sample(Control_state::running));
    for (const char* line :
         {"eb_events_built_total 123000\n", "eb_building_seconds_total 2.5\n", "eb_network_sent_bytes_total 53137152\n",
          "eb_network_received_bytes_total 53137150\n", "eb_network_transfer_seconds_total 1.25\n",
          "eb_network_sends_held_total 96\n", "eb_network_send_held_seconds_total 0.125\n", "eb_events_dropped_total 2000\n", "eb_events_in_doubt_total 100\n", "eb_parse_errors_total{error=\"bad_magic\"} 5\n",
          "eb_transport_errors_total{kind=\"reset\"} 1\n", "eb_transport_errors_total{kind=\"join_timeout\"} 0\n", "eb_transport_errors_total{kind=\"excluded\"} 0\n",
          "eb_data_connections_refused_total{reason=\"key\"} 3\n", "eb_data_connections_refused_total{reason=\"slow\"} 0\n", "eb_peers_lost_total 1\n", "eb_peer_up{peer=\"0\"} 1\n",
          "eb_peer_up{peer=\"1\"} 0\n", "eb_state{state=\"RUNNING\"} 1\n", "eb_state{state=\"PAUSED\"} 0\n",
          "eb_epoch 3\n", "eb_ring_fill_ratio{ring=\"mep\"} 0.25\n", "eb_phase_duration_seconds_bucket{le=\"+Inf\"} 0\n",
          "eb_barrier_wait_seconds_count 0\n", "eb_up 1\n"})
        EXPECT_NE(metrics.find(line), std::string::npos) << line;
    EXPECT_EQ(metrics.find("eb_peer_up{peer=\"2\"}"), std::string::npos) << "no link to itself";
    EXPECT_EQ(metrics.find("ring=\"mfp\""), std::string::npos) << "no MFP ring";
    for (const Control_state state : {Control_state::not_ready, Control_state::paused, Control_state::error})
        EXPECT_NE(prometheus_metrics(sample(state)).find("\neb_up 0\n"), std::string::npos);
}

// eb_numa_local says where a unit asked for a NUMA node ended up, and is
// absent where none was asked for (the NUMA-misaligned alert fires on a 0).
TEST(StatusRender, NumaLocalityIsAGaugePerResourceOnlyWhenANodeWasAskedFor) {
    Status_snapshot unpinned = sample(Control_state::running);
    EXPECT_EQ(prometheus_metrics(unpinned).find("eb_numa_local"), std::string::npos);

    Status_snapshot misplaced = sample(Control_state::running);
    misplaced.numa = numa_locality({.requested = "mlx5_0", .node = 1, .pinned = true, .cpus_local = true,
                                    .memory_local = false, .device_local = false, .warning = ""});
    const std::string metrics = prometheus_metrics(misplaced);
    for (const char* line : {"eb_numa_local{resource=\"cpus\"} 1\n", "eb_numa_local{resource=\"memory\"} 0\n",
                             "eb_numa_local{resource=\"device\"} 0\n"})
        EXPECT_NE(metrics.find(line), std::string::npos) << line;

    Status_snapshot by_node = sample(Control_state::running);
    by_node.numa = numa_locality({.requested = "7", .node = std::nullopt, .pinned = false, .cpus_local = false,
                                  .memory_local = false, .device_local = std::nullopt,
                                  .warning = "no NUMA node 7; running unpinned"});
    const std::string unplaced = prometheus_metrics(by_node);
    EXPECT_NE(unplaced.find("eb_numa_local{resource=\"cpus\"} 0\n"), std::string::npos) << unplaced;
    EXPECT_EQ(unplaced.find("resource=\"device\""), std::string::npos) << "no device was asked for";
}

// The exposition format as Prometheus itself reads it.
TEST(StatusRender, PromtoolAcceptsTheMetrics) {
    const char* promtool = "/usr/bin/promtool";
    if (!std::filesystem::exists(promtool))
        EB_UNAVAILABLE(promtool << " is missing: install Debian's prometheus package (make test does)");
    for (const Control_state state : {Control_state::not_ready, Control_state::running, Control_state::error}) {
        Status_snapshot snapshot = sample(state);
        if (state == Control_state::running) {
            snapshot.transport = verbs_transport();
            snapshot.numa = {.requested = true, .cpus_local = true, .memory_local = true, .device_local = false};
        }
        const auto path = std::filesystem::temp_directory_path() / ("eb-metrics-" + std::to_string(::getpid()));
        std::ofstream(path) << prometheus_metrics(snapshot);
        const std::string command = std::string(promtool) + " check metrics < " + path.string() + " 2>&1";
        FILE* pipe = ::popen(command.c_str(), "r");
        ASSERT_NE(pipe, nullptr);
        std::string output;
        char buffer[256];
        while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
        const int status = ::pclose(pipe);
        std::filesystem::remove(path);
        EXPECT_EQ(status, 0) << output;
    }
}

// The bodies the operator's client decodes (builderapi.Report), shared
// with its Go tests: a running verbs unit with a NUMA report, and a unit
// just started (NOT_READY, no table).
TEST(StatusRender, GoldenStatusBodiesForTheOperator) {
    Status_snapshot running = sample(Control_state::running);
    running.transport = verbs_transport();
    running.next_event = 125100;
    running.meps_discarded = 2;
    running.output_stalled_seconds = 12.5;
    running.consumer = Consumer_counts{1251, 1250000, 1000, 0};
    const Numa_report placed{.requested = "0", .node = 0, .pinned = true, .cpus_local = true,
                             .memory_local = true, .device_local = true, .warning = ""};
    running.numa_json = numa_report_json(placed);
    running.numa = numa_locality(placed);
    test::expect_golden("status-running.json", status_json(running) + "\n");
    test::expect_golden("metrics.txt", prometheus_metrics(running));

    Unit_status fresh(1);
    fresh.set_activity("idle");
    test::expect_golden("status-not-ready.json", status_json(fresh.snapshot()) + "\n");
}

}  // namespace
}  // namespace eb
