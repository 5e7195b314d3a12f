// eb-builder: one folded EB unit (RU + BU) per process.

#include <exception>
#include <iostream>
#include <numeric>
#include <string_view>
#include <thread>
#include <vector>

#include "checking_writer.hpp"
#include "config.hpp"
#include "event_builder.hpp"
#include "generator_reader.hpp"
#include "http_server.hpp"
#include "log.hpp"
#include "progress.hpp"
#include "schedule.hpp"
#include "stop_flag.hpp"
#include "tcp_mesh.hpp"
#include "tcp_transport.hpp"
#include "unit_status.hpp"

namespace {

// Connects the data mesh and builds events until done or stopped. Never
// throws: a failure is logged, shown as ERROR in the status, and held there
// until the unit is told to stop, so the operator can read it.
void build_events(const eb::Config& config, eb::Fd listener, eb::Unit_status& status, const eb::Stop_flag& stop) {
    try {
        auto mesh = eb::connect_mesh(std::move(listener), config.rank, config.peers, stop);
        if (!mesh) return;
        eb::Tcp_transport transport(config.rank, std::move(*mesh), stop);
        eb::Generator_reader source(config.rank, config.packing_factor, config.fragment_size, config.units());
        std::vector<std::uint32_t> sources(config.units());
        std::iota(sources.begin(), sources.end(), 0u);  // source id = rank, in rank order
        eb::Checking_writer output(eb::Mep_checker(std::move(sources), config.packing_factor), status);
        eb::Event_builder builder({config.packing_factor, eb::cycles_for_events(config.events, config.packing_factor)},
                                  transport, source, output);
        status.set_state(eb::Unit_state::running);
        eb::log_info("running");
        if (builder.run()) eb::log_info("built the requested ", config.events, " events");
    } catch (const std::exception& error) {
        status.fail(error.what());
        eb::log_error(error.what(), "; holding ERROR until stopped");
        stop.wait();
    }
}

int run_unit(const eb::Config& config) {
    eb::set_log_rank(config.rank);
    eb::Stop_flag stop;
    eb::stop_on_signals(stop);
    eb::Unit_status status(config.rank, config.units());
    // Bind both ports before anything runs, so a clash fails the start.
    eb::Http_server http(config.http_port, status, stop);
    eb::Fd listener = eb::listen_for_peers(config.peers[config.rank].port);
    eb::log_info("starting: rank ", config.rank, " of ", config.units(), " units, data port ",
                 config.peers[config.rank].port, ", status port ", config.http_port, ", packing factor ",
                 config.packing_factor, ", fragment size ", config.fragment_size, " B");

    std::jthread http_thread([&] { http.serve(); });
    std::jthread progress_thread([&] { eb::report_progress(status, stop); });
    build_events(config, std::move(listener), status, stop);
    status.set_state(eb::Unit_state::stopped);
    stop.request();  // ends both threads, joined on scope exit

    const eb::Status_snapshot last = status.snapshot();
    eb::log_info("stopped: ", last.events_built, " events built, ", last.events_incomplete, " incomplete, ",
                 last.meps_built, " MEPs");
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
