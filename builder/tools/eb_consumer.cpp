// eb-consumer: the reference consumer of a BU's MEP ring /eb-RUN-RANK-mep.
// Takes the eb-builder flags of the unit it reads from (so it knows the live
// sources, packing, event model and its BU's place in the MEP sequence) plus
//   --meps N   stop after N MEPs (default: until the builder closes the ring)
// Checks every event byte for byte: all live sources present, event ids
// contiguous and in sequence, sizes and payloads as generated. Prints
//   consumer: M MEPs, E events complete, I incomplete, P rejected
// and exits 0 only if every event was complete and none was rejected, the
// builder did not fail, and (with --events or --meps) every expected MEP came.
#include <charconv>
#include <iostream>

#include "flags.hpp"
#include "schedule.hpp"
#include "log.hpp"
#include "mep_checker.hpp"
#include "shm_ring.hpp"
#include "wire_format.hpp"
#include "tool_args.hpp"

int main(int argc, char** argv) {
    std::vector<std::string_view> args(argv + 1, argv + argc);
    auto own = eb::tools::take_own_flags(args, {"--meps"});
    const eb::Command_line command = eb::parse_command_line(args);
    if (const auto* error = std::get_if<eb::Usage_error>(&command)) {
        std::cerr << "eb-consumer: " << error->message << "\n";
        return 2;
    }
    if (!std::holds_alternative<eb::Config>(command)) {
        std::cerr << "usage: eb-consumer <eb-builder flags of the unit> [--meps N]\n";
        return 0;
    }
    const eb::Config& config = std::get<eb::Config>(command);
    std::uint64_t limit = 0;
    if (const std::string& n = own["--meps"];
        !n.empty() && std::from_chars(n.data(), n.data() + n.size(), limit).ec != std::errc{}) {
        std::cerr << "eb-consumer: --meps '" << n << "': expected a whole number\n";
        return 2;
    }
    eb::set_log_rank(config.rank);
    const eb::Rank_table table = config.rank_table();
    if (!table.runs_bu(config.rank)) {
        std::cerr << "eb-consumer: rank " << config.rank << " runs no BU in this layout; read a BU's ring\n";
        return 2;
    }

    eb::Parse_error_counts errors;
    eb::Mep_checker checker(table.rus(), config.packing_factor, config.event_model(), errors);
    const std::uint64_t stride = std::uint64_t{config.packing_factor} * table.bus().size();
    checker.expect_sequence(table.bu_index(config.rank) * std::uint64_t{config.packing_factor}, stride);
    std::uint64_t meps = 0, complete = 0, incomplete = 0, damaged = 0;
    // With --events the builder hands this BU's ceil(E/F) MEPs to the ring
    // (from the first one not taken yet, when taking over); --meps caps that.
    const std::uint64_t cycles = eb::cycles_for_events(config.events, config.packing_factor);
    std::uint64_t first_mep = 0;  // index in this BU's sequence of the first MEP read
    int exit_code = 0;
    try {
        eb::Stop_flag stop;
        eb::stop_on_signals(stop);
        eb::Shm_ring_reader ring(eb::ring_name(config.run_name, config.rank, "mep"), stop);
        while (limit == 0 || meps < limit) {
            const auto mep = ring.next();
            if (mep.empty()) {  // the builder closed the ring, complete or stopped
                if (ring.end() == eb::Ring_end::stopped) eb::log_info("the builder stopped before finishing");
                break;
            }
            // Taking over from a crashed consumer, the sequence goes on from
            // wherever that one stopped.
            if (meps == 0 && ring.resumed() && mep.size() >= sizeof(eb::Mep_header)) {
                const std::uint64_t first_event = eb::load<eb::Mep_header>(mep, 0).first_event_id;
                checker.expect_sequence(first_event, stride);
                first_mep = first_event / stride;
            }
            const eb::Mep_verdict verdict = checker.check(mep);
            ring.release();
            ++meps;
            complete += verdict.events_complete;
            incomplete += verdict.events_incomplete;
            if (!verdict.first_problem.empty() && ++damaged <= 10)  // then only counted
                eb::log_warning("MEP ", meps - 1, ": ", verdict.first_problem);
        }
    } catch (const eb::Stopped&) {
    } catch (const std::exception& error) {
        eb::log_error(error.what());
        exit_code = 1;
    }
    std::uint64_t expected = cycles == 0 ? limit : cycles - std::min(first_mep, cycles);
    if (limit != 0) expected = std::min(expected, limit);
    if (expected != 0 && exit_code == 0 && meps < expected) {
        eb::log_error("expected ", expected, " MEPs (", expected * config.packing_factor, " events), got ", meps);
        exit_code = 1;
    }
    if (complete + incomplete != meps * config.packing_factor) {
        eb::log_error(meps, " MEPs should hold ", meps * config.packing_factor, " events, got ", complete + incomplete);
        exit_code = 1;
    }
    std::uint64_t rejected = 0;
    for (std::size_t kind = 1; kind < eb::parse_error_kinds; ++kind)
        rejected += errors.get(static_cast<eb::Parse_error>(kind));
    std::cout << "consumer: " << meps << " MEPs, " << complete << " events complete, " << incomplete
              << " incomplete, " << rejected << " rejected" << std::endl;
    return exit_code != 0 || incomplete != 0 || rejected != 0 ? 1 : 0;
}
