// eb-farm-sim: what an event-building run would build on a farm, simulated
// with SimGrid: one actor per live rank running the builder's schedule
// (linear shifting, barrier plans, --barrier-every) over a platform made
// from the run's Fabric, MFP sizes from the builder's event-size model.
// The rank table is the operator's: eb-plan's output (--plan, or --fabric
// and --run, which runs eb-plan), or a table the operator published
// (--table with the fabric's shape). Prints one CSV row (--header first
// prints the column names); progress goes to standard error.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "farm_plan.hpp"
#include "farm_sim.hpp"

namespace {

nlohmann::json read_json(const std::string& file) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error(file + ": cannot be read");
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(file + ": " + e.what());
    }
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// eb-plan's output for the manifests: the operator's own planning.
nlohmann::json run_eb_plan(const std::string& eb_plan, const std::string& fabric, const std::string& run, const std::string& fail) {
    std::string command = quoted(eb_plan) + " -fabric " + quoted(fabric) + " -run " + quoted(run);
    if (!fail.empty()) command += " -fail-nodes " + quoted(fail);
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
    if (!pipe) throw std::runtime_error("cannot run " + eb_plan);
    std::string out;
    char buffer[65536];
    for (std::size_t got; (got = fread(buffer, 1, sizeof buffer, pipe.get())) > 0;) out.append(buffer, got);
    if (pclose(pipe.release()) != 0)
        throw std::runtime_error(eb_plan + " refused the manifests (its message above); set --eb-plan to the operator's eb-plan");
    return nlohmann::json::parse(out);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"eb-farm-sim: an event-building run on a farm's fabric, simulated with SimGrid"};
    std::string plan_file, fabric_file, run_file, table_file, fail_nodes, eb_plan = "eb-plan";
    eb::sim::Fabric_shape shape;
    eb::sim::Network_model network;
    eb::sim::Jitter_model jitter;
    eb::sim::Run_model run;
    std::string barrier = "tournament", sizes = "poisson";
    double nic_latency_us = network.nic_latency_s * 1e6, link_latency_us = network.link_latency_s * 1e6, overhead_us = 0,
           noise_us = 0, straggler_us = 0;
    bool header = false;
    int one_switch = 0;

    auto* plan_opt = app.add_option("--plan", plan_file, "eb-plan's output (JSON)");
    auto* fabric_opt = app.add_option("--fabric", fabric_file, "the Fabric manifest, planned by eb-plan with --run");
    auto* run_opt = app.add_option("--run", run_file, "the EventBuilderRun manifest");
    auto* table_opt = app.add_option("--table", table_file, "a rank table the operator published (ranks.json), with the fabric's shape");
    auto* one_switch_opt = app.add_option("--one-switch", one_switch,
        "instead of a table: this many folded units on one switch (a self-configured set), as on one machine's loopback device")
        ->check(CLI::Range(2, 100000));
    app.add_option("--fail-nodes", fail_nodes, "with --fabric: nodes lost, their units on spares or dropped as the operator's failover does");
    app.add_option("--eb-plan", eb_plan, "the operator's eb-plan binary")->capture_default_str();
    plan_opt->excludes(fabric_opt)->excludes(table_opt)->excludes(one_switch_opt);
    one_switch_opt->excludes(fabric_opt)->excludes(table_opt);
    fabric_opt->needs(run_opt)->excludes(table_opt);
    app.add_option("--leaves", shape.leaves, "with --table: leaf switches")->check(CLI::PositiveNumber);
    app.add_option("--spines", shape.spines, "with --table: spine switches")->check(CLI::PositiveNumber);
    app.add_option("--ports-per-leaf", shape.ports_per_leaf, "with --table: server ports per leaf")->check(CLI::PositiveNumber);
    app.add_option("--links-per-pair", shape.links_per_pair, "with --table: links per leaf-spine pair")->check(CLI::PositiveNumber);
    app.add_option("--routing", shape.routing, "with --table: PortModSpines or LeafPortModSpines")->capture_default_str();
    app.add_option("--nic-gbps", network.nic_gbps, "each endpoint's HCA, per direction")->capture_default_str()->check(CLI::PositiveNumber);
    app.add_option("--link-gbps", network.link_gbps, "each leaf-spine link, per direction")->capture_default_str()->check(CLI::PositiveNumber);
    app.add_option("--nic-latency-us", nic_latency_us, "endpoint to leaf")->capture_default_str()->check(CLI::NonNegativeNumber);
    app.add_option("--link-latency-us", link_latency_us, "leaf to spine")->capture_default_str()->check(CLI::NonNegativeNumber);
    app.add_option("--overhead-us", overhead_us, "host time to post and complete one message")->capture_default_str()->check(CLI::NonNegativeNumber);
    app.add_option("--noise-us", noise_us, "mean of each phase's exponential host delay")->capture_default_str()->check(CLI::NonNegativeNumber);
    app.add_option("--straggler-probability", jitter.straggler_probability, "chance a phase of a rank is a straggler's")
        ->capture_default_str()->check(CLI::Range(0.0, 1.0));
    app.add_option("--straggler-us", straggler_us, "a straggler's extra delay")->capture_default_str()->check(CLI::NonNegativeNumber);
    app.add_option("--seed", jitter.seed, "seed of the jitter")->capture_default_str();
    app.add_option("--packing-factor", run.packing_factor, "events per MFP")->capture_default_str()->check(CLI::Range(1u, 1000000u));
    app.add_option("--fragment-size", run.events.fragment_size, "mean fragment size, bytes")->capture_default_str()->check(CLI::Range(1u, 16384u));
    app.add_option("--sizes", sizes, "fragment sizes: poisson or fixed")->capture_default_str()->check(CLI::IsMember({"poisson", "fixed"}));
    app.add_option("--barrier", barrier, "none, tournament or centralized")->capture_default_str()
        ->check(CLI::IsMember({"none", "tournament", "centralized"}));
    app.add_option("--barrier-every", run.barrier_every, "phases between barriers")->capture_default_str()->check(CLI::Range(1u, 1000000u));
    app.add_option("--cycles", run.cycles, "cycles to simulate")->capture_default_str()->check(CLI::Range(1u, 1000000u));
    app.add_option("--receive-window", run.receive_window,
                   "as eb-builder --receive-window: a BU posts its receives this many phases ahead, each sending "
                   "its RU a credit (0: a cycle's at once, the default)")
        ->capture_default_str();
    app.add_option("--barrier-rounds", run.barrier_rounds, "calibration: only this many barrier rounds, their mean printed (barrier_round_us)")
        ->check(CLI::Range(0u, 1000000u));
    app.add_flag("--violate-schedule", run.violate_schedule, "for tests: RU 0 swaps its first two targets (two RUs on one BU)");
    app.add_flag("--header", header, "print the CSV column names first");
    app.allow_extras();  // --cfg=... goes to SimGrid
    CLI11_PARSE(app, argc, argv);

    try {
        eb::sim::Farm_plan plan;
        if (!plan_file.empty()) plan = eb::sim::read_plan(read_json(plan_file));
        else if (!fabric_file.empty()) plan = eb::sim::read_plan(run_eb_plan(eb_plan, fabric_file, run_file, fail_nodes));
        else if (!table_file.empty()) plan = eb::sim::read_table(read_json(table_file), shape);
        else if (one_switch > 0) plan = eb::sim::one_switch_plan(one_switch);
        else throw std::runtime_error("give --plan, --fabric and --run, --table with the fabric's shape, or --one-switch");
        network.nic_latency_s = nic_latency_us * 1e-6;
        network.link_latency_s = link_latency_us * 1e-6;
        network.message_overhead_s = overhead_us * 1e-6;
        jitter.phase_noise_s = noise_us * 1e-6;
        jitter.straggler_s = straggler_us * 1e-6;
        run.events.kind = sizes == "fixed" ? eb::Size_model::fixed : eb::Size_model::poisson;
        run.barrier = barrier == "none"          ? eb::Barrier_kind::none
                      : barrier == "centralized" ? eb::Barrier_kind::centralized
                                                 : eb::Barrier_kind::tournament;

        std::cerr << "eb-farm-sim: " << plan.ranks.size() << " ranks (" << plan.live() << " live) on " << plan.fabric.leaves
                  << " leaves, " << run.cycles << " cycles, barrier " << barrier << " every " << run.barrier_every << "\n";
        const auto wall = std::chrono::steady_clock::now();
        std::vector<char*> sim_args{argv[0]};
        for (const std::string& extra : app.remaining()) sim_args.push_back(const_cast<char*>(extra.c_str()));
        const eb::sim::Sim_result r =
            eb::sim::simulate(plan, network, jitter, run, static_cast<int>(sim_args.size()), sim_args.data());
        const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
        if (header)
            std::cout << "ranks,live,leaves,barrier,barrier_every,receive_window,packing_factor,cycles,nic_gbps,link_gbps,overhead_us,noise_us,"
                         "event_rate,throughput_tbps,analytic_tbps,barrier_share,max_link_utilisation,mean_link_utilisation,"
                         "shared_link_seconds,barrier_round_us,simulated_seconds,wall_seconds\n";
        std::cout << r.ranks << ',' << r.live << ',' << plan.fabric.leaves << ',' << barrier << ',' << run.barrier_every << ','
                  << run.receive_window << ',' << run.packing_factor << ',' << run.cycles << ',' << network.nic_gbps << ',' << network.link_gbps << ','
                  << overhead_us << ',' << noise_us << ',' << r.event_rate << ',' << r.throughput_tbps << ','
                  << eb::sim::analytic_throughput_tbps(plan, network) << ',' << r.barrier_share << ','
                  << r.max_link_utilisation << ',' << r.mean_link_utilisation << ',' << r.shared_link_seconds << ','
                  << r.barrier_round_s * 1e6 << ',' << r.seconds << ',' << wall_s << "\n";
    } catch (const std::exception& e) {
        std::cerr << "eb-farm-sim: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
