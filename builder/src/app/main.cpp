// eb-builder: one EB unit (RU + BU, folded) per process.

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "app/flags.hpp"
#include "control/control_token.hpp"
#include "app/data_thread_count.hpp"
#include "control/http_server.hpp"
#include "base/log.hpp"
#include "app/numa.hpp"
#include "telemetry/progress.hpp"
#include "base/stop_flag.hpp"
#include "unit/unit.hpp"
#include "telemetry/unit_status.hpp"

namespace {

// --numa-node / --rdma-device, else the operator's environment.
std::string numa_request(const eb::Config& config) {
    if (!config.numa.empty()) return config.numa;
    for (const char* name : {"EB_NUMA_NODE", "EB_RDMA_DEVICE"})
        if (const char* value = std::getenv(name); value != nullptr && *value != '\0') return value;
    return "";
}

int run_unit(eb::Config config) {
    // The operator names the unit's RDMA device in the environment.
    if (const char* device = std::getenv("EB_RDMA_DEVICE"); config.rdma_device.empty() && device != nullptr)
        config.rdma_device = device;
    if (config.rank_given) eb::set_log_rank(config.rank);
    // Before any thread starts: threads inherit the CPU and memory binding.
    const eb::Numa_plan numa = eb::plan_numa(numa_request(config));
    const eb::Numa_report placement = eb::apply_numa_plan(numa);
    if (!placement.warning.empty()) eb::log_warning(placement.warning);
    else if (placement.node) eb::log_info("pinned to NUMA node ", *placement.node);
    const auto threads = eb::choose_data_threads(config.data_threads, eb::allowed_cpu_count());
    if (const auto* error = std::get_if<std::string>(&threads)) throw std::runtime_error(*error);
    config.data_threads = std::get<unsigned>(threads);

    const auto token = eb::Control_token::load(
        config.token_file.empty() ? std::nullopt : std::optional<std::string>(config.token_file),
        std::getenv("EB_CONTROL_TOKEN"));
    if (const auto* error = std::get_if<std::string>(&token)) throw std::runtime_error(*error);
    if (!std::get<eb::Control_token>(token).configured())
        eb::log_warning("no control token (--token-file or EB_CONTROL_TOKEN): the control API refuses commands");
    auto data_key = eb::Data_key::load(
        config.data_key_file.empty() ? std::nullopt : std::optional<std::string>(config.data_key_file),
        std::getenv("EB_DATA_KEY"));
    if (const auto* error = std::get_if<std::string>(&data_key)) throw std::runtime_error(*error);
    config.data_key = std::get<eb::Data_key>(std::move(data_key));
    if (!config.data_key.configured())
        eb::log_warning("no data key (--data-key-file or EB_DATA_KEY): data connections are not authenticated, and "
                        "any process that reaches the data port can take a rank");

    // A signal asks the unit to stop (with its set); the API and the progress
    // reports go on until the unit has.
    eb::Stop_flag signalled, shutdown;
    eb::stop_on_signals(signalled);
    eb::Unit_status status(config.rank);
    status.set_numa(eb::numa_report_json(placement), eb::numa_locality(placement));
    eb::Transport_report transport;
    transport.kind = eb::transport_kind_name(config.transport);
    status.set_transport(transport);
    eb::Unit unit(config, status, signalled);
    // Bind the control port (and, self-configured, the data port) before
    // anything runs, so a clash fails the start.
    eb::Http_server http(config.http_port, unit, std::get<eb::Control_token>(token), shutdown);
    if (config.self_configured()) unit.configure_from_flags();
    eb::log_info("started ", config.self_configured() ? "self-configured" : "controlled, waiting for configure",
                 ": control port ", config.http_port, ", packing factor ", config.packing_factor, ", fragment size ",
                 config.fragment_size, " B, barrier ", eb::barrier_name(config.barrier), " every ",
                 config.barrier_every, " phases, ", config.data_threads, " data threads, ",
                 config.transport == eb::Transport_kind::verbs
                     ? (config.receive_window == 0 ? std::string("a cycle's receives posted at once")
                                                   : std::to_string(config.receive_window) + " receives posted ahead")
                     : std::to_string(config.tcp_streams) + " TCP streams");

    std::jthread http_thread([&] {
        try {
            http.serve();
        } catch (const std::exception& error) {  // a unit nobody can drive or probe must not linger
            eb::log_error("control API server: ", error.what(), "; stopping");
            signalled.request();
        }
    });
    std::jthread progress_thread([&] { eb::report_progress(status, shutdown); });
    // However this scope ends, an exception from the run included, both
    // threads are told to end before they are joined (declared after them,
    // this is destroyed first).
    struct Shutdown_on_exit {
        eb::Stop_flag& shutdown;
        ~Shutdown_on_exit() { shutdown.request(); }
    } shutdown_on_exit{shutdown};
    const bool completed = unit.run();
    shutdown.request();

    const eb::Status_snapshot last = status.snapshot();
    eb::log_info("stopped: ", last.events_built, " events built, ", last.events_incomplete, " incomplete, ",
                 last.meps_built, " MEPs, ", last.bytes_built, " bytes, ", last.events_dropped, " dropped, ",
                 last.events_in_doubt, " in doubt, after ",
                 last.building_seconds, " s of building, ", last.network_bytes_sent, " bytes sent and ",
                 last.network_bytes_received, " received over the network in ", last.network_seconds,
                 " s of data transfer",
                 completed ? " (the requested events are built)" : "");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string_view> args(argv + 1, argv + argc);
    const eb::Command_line command = eb::parse_command_line(args);
    if (std::holds_alternative<eb::Show_help>(command)) {
        std::cout << eb::usage();
        return 0;
    }
    if (std::holds_alternative<eb::Describe_flags>(command)) {
        std::cout << eb::describe_flags();
        return 0;
    }
    if (const auto* error = std::get_if<eb::Usage_error>(&command)) {
        std::cerr << "eb-builder: " << error->message << "\n";
        return 2;
    }
    try {
        return run_unit(std::get<eb::Config>(command));
    } catch (const std::exception& error) {
        eb::log_error("cannot start: ", error.what());
        return 1;
    }
}
