// eb-consumer: the reference consumer of a BU's MEP ring /eb-RUN-RANK-mep.
// Takes the eb-builder flags of the unit it reads from (so it knows its
// rank, packing and event model) plus
//   --meps N   stop after N MEPs (default: until the builder closes the ring)
// In a builder pod (no --peers) the rank and packing factor come from
// EB_RANK and EB_PACKING_FACTOR, the ring's name from EB_MEP_RING, and what each epoch's MEPs hold (sources,
// this BU's stride) from what the builder publishes beside the ring
// (Mep_expectation), so it follows failovers; with --peers, from the flags.
// Checks every event byte for byte: all live sources present, event ids
// contiguous and in sequence (whole MEPs the builder dropped, which it
// counts, may be missing), sizes and payloads as generated, and each MEP's
// stream map the one the builder published (no readout stream lacked for
// the event to be complete). Publishes its counts beside the ring for the
// builder's status (Consumer_report_writer) and, per readout stream, the
// events that held and lacked it (publish_stream_tallies, each time it has
// caught up with the builder and at least once a second; removed at the
// end), and prints
//   stream NAME: H events held it, L lacked it     (one line per stream)
//   consumer: M MEPs, E events complete, I incomplete, P rejected
// and exits 0 only if every event was complete and none was rejected, the
// builder did not fail, and (with --events or --meps) every expected MEP came
// or was dropped by the builder.
#include <charconv>
#include <chrono>
#include <deque>
#include <iostream>
#include <optional>

#include "buffers/consumer_report.hpp"
#include "app/flags.hpp"
#include "base/log.hpp"
#include "formats/mep_checker.hpp"
#include "buffers/mep_expectation.hpp"
#include "schedule/schedule.hpp"
#include "buffers/shm_ring.hpp"
#include "tool_args.hpp"
#include "formats/wire_format.hpp"

namespace {

// What MEPs of the epoch `epoch` hold, as the builder published it.
eb::Mep_expectation published(const std::string& ring, std::uint32_t epoch) {
    std::optional<eb::Mep_expectation> expectation = eb::read_mep_expectation(ring, epoch);
    if (!expectation)
        throw std::runtime_error("a MEP of rank table epoch " + std::to_string(epoch) + " came, but the builder published no " +
                                 eb::mep_expectation_name(ring, epoch) + " for it before (is it an eb-builder?)");
    return *expectation;
}

std::uint64_t rejected_count(const eb::Parse_error_counts& errors) {
    std::uint64_t rejected = 0;
    for (std::size_t kind = 1; kind < eb::parse_error_kinds; ++kind)
        rejected += errors.get(static_cast<eb::Parse_error>(kind));
    return rejected;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string_view> args(argv + 1, argv + argc);
    auto own = eb::tools::take_own_flags(args, {"--meps"});
    std::deque<std::string> from_environment;
    eb::tools::add_flags_from_environment(args, from_environment,
                                          {{"--rank", "EB_RANK"}, {"--packing-factor", "EB_PACKING_FACTOR"}});
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
    const bool in_pod = config.peers.empty();
    const eb::Rank_table table = config.rank_table();
    if (!in_pod && !table.runs_bu(config.rank)) {
        std::cerr << "eb-consumer: rank " << config.rank << " runs no BU in this layout; read a BU's ring\n";
        return 2;
    }
    const std::string ring_name = eb::tools::ring_to_open("EB_MEP_RING", config.run_name, config.rank, "mep");

    eb::Parse_error_counts errors;
    // In a pod: sources and stride come with each epoch's first MEP.
    eb::Mep_checker checker(in_pod ? std::vector<std::uint32_t>{} : table.sources(), config.packing_factor,
                            config.event_model(), errors);
    // The BU drops MEPs this consumer never sees (its ring full, a source
    // lost mid-transfer) and counts them: a gap of whole MEPs is no error.
    checker.accept_dropped_meps();
    std::uint64_t stride = 0;
    std::uint32_t epoch = 0;  // in a pod: of the expectation in force; 0: none yet
    if (!in_pod) {
        stride = std::uint64_t{config.packing_factor} * table.bus().size();
        checker.expect_sequence(table.bu_index(config.rank) * std::uint64_t{config.packing_factor}, stride);
    }
    std::uint64_t meps = 0, complete = 0, incomplete = 0, damaged = 0;
    // With --events the builder hands this BU's ceil(E/F) MEPs to the ring
    // (from the first one not taken yet, when taking over); --meps caps that.
    const std::uint64_t cycles = eb::cycles_for_events(config.events, config.packing_factor);
    std::uint64_t first_mep = 0;  // index in this BU's sequence of the first MEP read
    int exit_code = 0;
    // Before the try, so SIGTERM stays caught until main returns: a pod's
    // containers are all signalled at once, and a consumer whose builder
    // closed the ring first must still get to remove its files below.
    eb::Stop_flag stop;
    eb::stop_on_signals(stop);
    try {
        eb::Shm_ring_reader ring(ring_name, stop);
        eb::Consumer_report_writer report(ring_name);
        eb::remove_stream_tallies(ring_name);  // a killed predecessor's counts are not this consumer's
        auto next_tallies = std::chrono::steady_clock::now();
        while (limit == 0 || meps < limit) {
            const auto mep = ring.next();
            if (mep.empty()) {  // the builder closed the ring, complete or stopped
                if (ring.end() == eb::Ring_end::stopped) eb::log_info("the builder stopped before finishing");
                break;
            }
            // An unframed MEP has no header: the checker rejects it.
            // (A flag beside a value, not std::optional: GCC's thread-sanitizer
            // build takes the optional's payload for maybe-uninitialized.)
            const bool framed = mep.size() >= sizeof(eb::Mep_header);
            const eb::Mep_header header = framed ? eb::load<eb::Mep_header>(mep, 0) : eb::Mep_header{};
            // A new epoch (in a pod): other sources, maybe another stride,
            // and the sequence goes on from this MEP.
            if (in_pod && framed && header.epoch != epoch) {
                const eb::Mep_expectation expectation = published(ring_name, header.epoch);
                checker.expect_sources(expectation.sources, expectation.streams);
                checker.expect_sequence(header.first_event_id, expectation.stride);
                stride = expectation.stride;
                epoch = header.epoch;
                eb::log_info("MEPs of rank table epoch ", epoch, ": ", expectation.sources.size(), " sources (",
                             eb::describe_stream_map(expectation.streams), "), from event ", header.first_event_id);
            }
            // Taking over from a crashed consumer, the sequence goes on from
            // wherever that one stopped.
            if (meps == 0 && ring.resumed() && framed && stride != 0) {
                checker.expect_sequence(header.first_event_id, stride);
                first_mep = header.first_event_id / stride;
            }
            const eb::Mep_verdict verdict = checker.check(mep);
            ring.release();
            ++meps;
            complete += verdict.events_complete;
            incomplete += verdict.events_incomplete;
            if (!verdict.first_problem.empty() && ++damaged <= 10)  // then only counted
                eb::log_warning("MEP ", meps - 1, ": ", verdict.first_problem);
            // Per stream first, then the report: a reader that sees the
            // report's counts finds the streams' at least as far along.
            // Caught up with the builder (the counts are then final until
            // the next MEP), or once a second while behind.
            if (const auto now = std::chrono::steady_clock::now(); ring.fill() == 0 || now >= next_tallies) {
                eb::publish_stream_tallies(ring_name, checker.stream_tallies());
                next_tallies = now + std::chrono::seconds(1);
            }
            report.publish({meps, complete, incomplete, rejected_count(errors)});
        }
    } catch (const eb::Stopped&) {
    } catch (const std::exception& error) {
        eb::log_error(error.what());
        exit_code = 1;
    }
    std::uint64_t expected = cycles == 0 ? limit : cycles - std::min(first_mep, cycles);
    if (limit != 0) expected = std::min(expected, limit);
    if (expected != 0 && exit_code == 0 && meps + checker.skipped_meps() < expected) {
        eb::log_error("expected ", expected, " MEPs (", expected * config.packing_factor, " events), got ", meps,
                      " and ", checker.skipped_meps(), " the builder dropped");
        exit_code = 1;
    }
    if (checker.skipped_meps() != 0)
        eb::log_info(checker.skipped_meps(), " MEPs of the sequence never came: the builder dropped them (its events_dropped counts them)");
    if (complete + incomplete != meps * config.packing_factor) {
        eb::log_error(meps, " MEPs should hold ", meps * config.packing_factor, " events, got ", complete + incomplete);
        exit_code = 1;
    }
    eb::remove_stream_tallies(ring_name);  // printed below instead
    for (const auto& [name, tally] : checker.stream_tallies())
        std::cout << "stream " << name << ": " << tally.held << " events held it, " << tally.lacked << " lacked it\n";
    const std::uint64_t rejected = rejected_count(errors);
    std::cout << "consumer: " << meps << " MEPs, " << complete << " events complete, " << incomplete
              << " incomplete, " << rejected << " rejected" << std::endl;
    return exit_code != 0 || incomplete != 0 || rejected != 0 ? 1 : 0;
}
