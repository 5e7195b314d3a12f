// eb-readout-emulator: stands in for a readout card driver. Writes the MFPs
// of source RANK into the shared-memory ring /eb-RUN-RANK-mfp that an
// eb-builder started with --source shm reads, or into a file for
// --source file. Takes the eb-builder flags of the unit it feeds, plus:
//   --corrupt-every K   flip the magic of every K-th MFP (tests the RU's checks)
//   --file PATH         write to PATH instead of the ring
// It writes ceil(--events / --packing-factor) MFPs x the number of live BUs
// (enough for that many events on every BU), or until SIGTERM with --events 0.
// In a builder pod (no --peers) it plays the readout driver: the rank, the
// packing factor, the ring's name and size come from EB_RANK,
// EB_PACKING_FACTOR, EB_MFP_RING and EB_MFP_RING_MIB, the number of BUs
// from the rank table at EB_RANK_TABLE.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>

#include "control/configure_request.hpp"
#include "app/flags.hpp"
#include "buffers/generator_reader.hpp"
#include "formats/event_model.hpp"
#include "base/log.hpp"
#include "formats/mfp.hpp"
#include "schedule/schedule.hpp"
#include "buffers/shm_ring.hpp"
#include "tool_args.hpp"
#include "formats/wire_format.hpp"

namespace {

// The live BUs of the set the unit belongs to: from the flags, or in a pod
// from the rank table the operator mounts (a failover keeps their number).
std::size_t live_bus(const eb::Config& config) {
    if (!config.peers.empty()) return config.rank_table().bus().size();
    const char* path = std::getenv("EB_RANK_TABLE");
    if (path == nullptr) throw std::runtime_error("no --peers and no EB_RANK_TABLE: give the unit's flags or run it in a builder pod");
    std::ifstream file(path);
    const std::string table((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (!file && !file.eof()) throw std::runtime_error(std::string("EB_RANK_TABLE ") + path + ": cannot read it");
    const auto parsed = eb::parse_configure_request(
        "{\"rank\":" + std::to_string(config.rank) + ",\"table\":" + table + "}", config.rank, eb::Live_ranks::optional);
    if (const auto* error = std::get_if<std::string>(&parsed))
        throw std::runtime_error(std::string("EB_RANK_TABLE ") + path + ": " + *error);
    const std::size_t bus = eb::Rank_table(std::get<eb::Configure_request>(parsed).functions).bus().size();
    // Every unit failed with no spare left: this pod is a spare the
    // operator restores a unit onto, and its table changes then. The BUs
    // only size the ring check here (a pod's driver writes until SIGTERM),
    // so the driver goes on rather than crash-loop in back-off.
    if (bus == 0)
        eb::log_warning("EB_RANK_TABLE ", path, ": no live rank runs a BU (every unit failed with no spare left): ",
                        "writing MFPs for the unit restored here");
    return bus;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string_view> args(argv + 1, argv + argc);
    auto own = eb::tools::take_own_flags(args, {"--corrupt-every", "--file"});
    std::deque<std::string> from_environment;
    eb::tools::add_flags_from_environment(
        args, from_environment,
        {{"--rank", "EB_RANK"}, {"--packing-factor", "EB_PACKING_FACTOR"}, {"--ring-mib", "EB_MFP_RING_MIB"}});
    const eb::Command_line command = eb::parse_command_line(args);
    if (const auto* error = std::get_if<eb::Usage_error>(&command)) {
        std::cerr << "eb-readout-emulator: " << error->message << "\n";
        return 2;
    }
    if (!std::holds_alternative<eb::Config>(command)) {
        std::cerr << "usage: eb-readout-emulator <eb-builder flags of the unit> [--corrupt-every K] [--file PATH]\n";
        return 0;
    }
    const eb::Config& config = std::get<eb::Config>(command);
    std::uint64_t corrupt_every = 0;
    if (const std::string& k = own["--corrupt-every"]; !k.empty() &&
        std::from_chars(k.data(), k.data() + k.size(), corrupt_every).ec != std::errc{}) {
        std::cerr << "eb-readout-emulator: --corrupt-every '" << k << "': expected a whole number\n";
        return 2;
    }
    eb::set_log_rank(config.rank);
    std::size_t bus = 0;
    try {
        bus = live_bus(config);
    } catch (const std::exception& error) {
        std::cerr << "eb-readout-emulator: " << error.what() << "\n";
        return 2;
    }
    if (own["--file"].empty()) {
        // The RU holds one MFP per live BU through a cycle and needs one more
        // to go on; a ring too small for that would deadlock both sides. Count
        // a further record for the space a wrap can waste.
        const double mean = eb::mean_fragment_size(config.event_model(), config.rank);
        const auto fragment_bound = static_cast<std::uint32_t>(
            config.size_model == eb::Size_model::fixed
                ? config.fragment_size
                : std::min<double>(eb::max_fragment_bytes, mean + 12 * std::sqrt(mean) + 16));
        const std::uint64_t record = (16 + eb::mfp_bytes(config.packing_factor, fragment_bound) + 63) & ~std::uint64_t{63};
        const std::uint64_t needed = (bus + 2) * record;
        if (needed > (std::uint64_t{config.ring_mib} << 20)) {
            std::cerr << "eb-readout-emulator: the RU holds " << bus
                      << " MFPs of up to " << record << " bytes and needs one more: raise --ring-mib of "
                      << "eb-readout-emulator to at least " << ((needed + (1 << 20) - 1) >> 20) << " MiB\n";
            return 2;
        }
    }
    const std::uint64_t mfps = eb::cycles_for_events(config.events, config.packing_factor) * bus;

    eb::Stop_flag stop;
    eb::stop_on_signals(stop);
    std::optional<eb::Shm_ring_writer> ring;  // marked failed when left on an error
    try {
        eb::Generator_reader generator(config.rank, config.packing_factor, config.event_model(), 1);
        std::ofstream file;
        if (!own["--file"].empty()) {
            file.open(own["--file"], std::ios::binary);
            if (!file) throw std::runtime_error("--file " + own["--file"] + ": cannot create it");
        } else {
            ring.emplace(eb::tools::ring_to_open("EB_MFP_RING", config.run_name, config.rank, "mfp"),
                         config.ring_mib << 20, stop);
        }
        std::uint64_t written = 0;
        std::uint64_t next_event = 0;  // of the MFP made next
        for (; (mfps == 0 || written < mfps) && !stop.requested(); ++written) {
            // A unit joining a running set skips to the set's event: the
            // MFPs before it need not be made (a card's would be gone).
            if (ring) {
                const std::uint64_t wanted = ring->wanted_event() / config.packing_factor * config.packing_factor;
                if (wanted > next_event) {
                    eb::log_info("the builder skips to event ", wanted, ": going there from event ", next_event);
                    generator.skip_to(wanted);
                    next_event = wanted;
                }
            }
            const auto mfp = generator.next();
            next_event += config.packing_factor;
            std::span<std::byte> out;
            std::vector<std::byte> copy;
            if (ring) out = ring->allocate(mfp.size());
            else out = (copy.resize(mfp.size()), std::span(copy));
            std::memcpy(out.data(), mfp.data(), mfp.size());
            if (corrupt_every != 0 && written % corrupt_every == corrupt_every - 1) out[0] ^= std::byte{0xFF};
            if (ring) ring->commit();
            else file.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
            generator.release();
        }
        eb::log_info("wrote ", written, " MFPs");
        if (ring && stop.requested()) ring->stop();
        else if (ring) ring->finish();  // closing before the builder attached would lose them
    } catch (const eb::Stopped&) {
        if (ring) ring->stop();
    } catch (const std::exception& error) {
        eb::log_error(error.what());
        return 1;
    }
    return 0;
}
