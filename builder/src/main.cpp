// eb-builder: one folded EB unit (RU + BU) per process.

#include <chrono>
#include <exception>
#include <iostream>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "barrier.hpp"
#include "config.hpp"
#include "event_builder.hpp"
#include "http_server.hpp"
#include "log.hpp"
#include "progress.hpp"
#include "schedule.hpp"
#include "shm_ring.hpp"
#include "stop_flag.hpp"
#include "tcp_mesh.hpp"
#include "tcp_transport.hpp"
#include "unit_buffers.hpp"
#include "unit_status.hpp"

namespace {

// Connects the data mesh and builds events until done or stopped. Never
// throws: a failure is logged, shown as ERROR in the status, and held there
// until the unit is told to stop, so the operator can read it.
// `started` is set when the mesh is up and building starts.
void build_events(const eb::Config& config, const eb::Rank_table& table, eb::Unit_buffers& buffers, eb::Fd listener,
                  eb::Unit_status& status, const eb::Stop_flag& stop, std::chrono::steady_clock::time_point& started) {
    try {
        std::vector<bool> live(table.units());
        for (eb::Rank rank = 0; rank < table.units(); ++rank) live[rank] = table.live(rank);
        auto mesh = eb::connect_mesh(std::move(listener), config.rank, config.peers, std::move(live), stop);
        if (!mesh) {
            buffers.stop_output();
            return;
        }
        eb::Tcp_transport transport(config.rank, std::move(*mesh), stop);
        std::optional<eb::Barrier> barrier;
        if (config.barrier != eb::Barrier_kind::none) barrier.emplace(config.barrier, transport, table.live_ranks());
        eb::Event_builder builder(
            {config.packing_factor, eb::cycles_for_events(config.events, config.packing_factor), config.barrier_every},
            table, transport,
            {buffers.source(), buffers.output(), barrier ? &*barrier : nullptr, &status.parse_errors()});
        status.set_state(eb::Unit_state::running);
        eb::log_info("running");
        started = std::chrono::steady_clock::now();
        if (builder.run()) {
            eb::log_info("built the requested ", config.events, " events");
            buffers.finish_output();
        } else {
            buffers.stop_output();
        }
    } catch (const eb::Stopped&) {
        // Asked to stop while waiting on a shared-memory ring: a normal stop.
        buffers.stop_output();
    } catch (const std::exception& error) {
        buffers.fail_output();  // the consumer must not take this for a complete run
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
    eb::log_info("starting: rank ", config.rank, " of ", config.units(), " ranks (", config.dummies.size(),
                 " dummies, ", eb::layout_name(config.layout), "), data port ", config.peers[config.rank].port,
                 ", status port ", config.http_port, ", packing factor ", config.packing_factor, ", fragment size ",
                 config.fragment_size, " B, barrier ", eb::barrier_name(config.barrier), " every ",
                 config.barrier_every, " phases");

    std::jthread http_thread([&] { http.serve(); });
    std::jthread progress_thread([&] { eb::report_progress(status, stop); });
    // Open the source and output before the mesh: a bad --source-file, a ring
    // held by a live writer or a full /dev/shm fails the start (exit 1), not
    // the run. Waiting for a source ring's writer may take a while.
    const eb::Rank_table table = config.rank_table();
    std::optional<eb::Unit_buffers> buffers;
    try {
        buffers.emplace(config, table, status, stop);
    } catch (const eb::Stopped&) {
        // Stopped while waiting for the MFP ring: a normal stop.
    } catch (...) {
        stop.request();  // ends both threads, joined on the way out
        throw;
    }
    auto started = std::chrono::steady_clock::now();
    if (buffers) build_events(config, table, *buffers, std::move(listener), status, stop, started);
    const double building_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    status.set_state(eb::Unit_state::stopped);
    stop.request();  // ends both threads, joined on scope exit

    const eb::Status_snapshot last = status.snapshot();
    eb::log_info("stopped: ", last.events_built, " events built, ", last.events_incomplete, " incomplete, ",
                 last.meps_built, " MEPs, ", last.bytes_built, " bytes in ", building_seconds, " s of building");
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
