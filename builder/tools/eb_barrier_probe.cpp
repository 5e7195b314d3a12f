// eb-barrier-probe: one process of a barrier test or benchmark. Runs ROUNDS
// barriers of KIND among the units of PEERS over the TCP transport, and
// proves each: before a round's barrier the process counts itself in a
// shared witness file (one u32 per round); after it, the count must be all
// of them, or some process left before everyone arrived (exit 3).
// Rank 0 prints "barrier_ns=<mean>" over the rounds after the first.
#include <fcntl.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "engine/barrier.hpp"
#include "app/flags.hpp"
#include "base/fd.hpp"
#include "base/log.hpp"
#include "transport/tcp/tcp_mesh.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace {

int usage(const std::string& why) {
    std::cerr << "eb-barrier-probe: " << why
              << "\nusage: eb-barrier-probe --rank R --peers H:P,... --barrier KIND --events ROUNDS WITNESS_FILE\n"
                 "  (WITNESS_FILE: ROUNDS x 4 zero bytes, shared by all the processes)\n";
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage("missing arguments");
    // The eb-builder flags, so the units are described the same way; the
    // witness file comes last.
    const std::vector<std::string_view> args(argv + 1, argv + argc - 1);
    const eb::Command_line command = eb::parse_command_line(args);
    if (const auto* error = std::get_if<eb::Usage_error>(&command)) return usage(error->message);
    if (!std::holds_alternative<eb::Config>(command)) return usage("--help is not a probe run");
    const eb::Config& config = std::get<eb::Config>(command);
    const std::uint64_t rounds = config.events;
    if (rounds < 2) return usage("--events (the number of barriers) must be at least 2");
    eb::set_log_rank(config.rank);

    const eb::Fd witness_fd(::open(argv[argc - 1], O_RDWR | O_CLOEXEC));
    if (!witness_fd) return usage(std::string("cannot open the witness file ") + argv[argc - 1]);
    void* mapped = ::mmap(nullptr, rounds * 4, PROT_READ | PROT_WRITE, MAP_SHARED, witness_fd.get(), 0);
    if (mapped == MAP_FAILED) return usage("cannot map the witness file; it must hold ROUNDS x 4 bytes");
    auto* arrived = static_cast<std::uint32_t*>(mapped);

    try {
        eb::Stop_flag stop;
        eb::stop_on_signals(stop);
        auto mesh = eb::connect_mesh(eb::listen_for_peers(config.peers[config.rank].port), config.rank, config.peers,
                                     {}, stop);
        if (!mesh) return 1;
        // The peer timeout of the flags: a probe of a loaded machine may be
        // given more than the builder's default, lest it lose a peer that was
        // only unscheduled and let the others pass without it.
        const eb::Transport_settings settings = config.transport_settings();
        eb::Tcp_transport transport(config.rank, std::move(*mesh), stop, {},
                                    eb::Liveness{std::chrono::milliseconds(settings.peer_timeout_ms),
                                                 std::chrono::milliseconds(settings.setup_timeout_ms)});
        const eb::Rank_table table = config.rank_table();
        eb::Barrier barrier(config.barrier, transport, table.live_ranks());
        const auto participants = static_cast<std::uint32_t>(table.live_ranks().size());

        std::chrono::steady_clock::time_point timed_from;
        for (std::uint64_t round = 0; round < rounds; ++round) {
            std::atomic_ref<std::uint32_t>(arrived[round]).fetch_add(1, std::memory_order_acq_rel);
            if (!barrier.wait()) return 1;
            const std::uint32_t seen = std::atomic_ref<std::uint32_t>(arrived[round]).load(std::memory_order_acquire);
            if (seen != participants) {
                std::cerr << "rank " << config.rank << " left barrier " << round << " when only " << seen << " of "
                          << participants << " had arrived\n";
                return 3;
            }
            if (round == 0) timed_from = std::chrono::steady_clock::now();
        }
        const auto took = std::chrono::steady_clock::now() - timed_from;
        // A last barrier, so no process closes its connections while others
        // still wait for a release through it.
        if (!barrier.wait()) return 1;
        if (config.rank == 0)
            std::cout << "barrier_ns="
                      << std::chrono::duration_cast<std::chrono::nanoseconds>(took).count() / (rounds - 1) << "\n";
    } catch (const std::exception& error) {
        std::cerr << "rank " << config.rank << ": " << error.what() << "\n";
        return 1;
    }
    return 0;
}
