#include "event_builder.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "log.hpp"
#include "mep_layout.hpp"
#include "mfp.hpp"
#include "mfp_parser.hpp"
#include "schedule.hpp"

namespace eb {
namespace {
// Beyond this many rejected source MFPs only the counters keep track.
constexpr std::uint64_t rejected_mfps_logged = 10;
}  // namespace

Event_builder::Event_builder(Settings settings, const Rank_table& table, Transport& transport, Unit unit)
    : settings_(settings),
      table_(table),
      transport_(transport),
      unit_(unit),
      rank_(transport.rank()),
      mfps_(table.units()),
      announced_(table.units()),
      received_(table.units()),
      stand_ins_(table.units()) {
    if ((unit.source != nullptr) != table.runs_ru(rank_) || (unit.output != nullptr) != table.runs_bu(rank_) ||
        (unit.source != nullptr && unit.errors == nullptr) || settings.barrier_every == 0)
        throw std::logic_error("Event_builder: the unit's buffers do not match its roles");
    if (table.runs_ru(rank_))
        for (const Rank bu : table.bus())
            announce_sends_.push_back({bu, std::as_bytes(std::span(&announced_[bu], 1))});
    if (table.runs_bu(rank_)) {
        for (const Rank ru : table.rus())
            announce_receives_.push_back({ru, std::as_writable_bytes(std::span(&received_[ru], 1))});
        mfp_sizes_.resize(table.rus().size());
    }
}

bool Event_builder::run() {
    for (std::uint64_t cycle = 0; settings_.cycles == 0 || cycle < settings_.cycles; ++cycle)
        if (!run_cycle(cycle)) return false;
    return true;
}

std::span<const std::byte> Event_builder::next_mfp(std::uint64_t chunk, Rank bu) {
    const std::span<const std::byte> mfp = unit_.source->next();
    if (mfp.empty())
        throw std::runtime_error("the MFP source has no more data (the end of --source-file, or the ring's writer "
                                 "closed it); stop the run with --events before the data runs out");
    Mfp_view view;
    const Parse_status status =
        parse_mfp(mfp, {rank_, chunk * settings_.packing_factor, settings_.packing_factor}, view);
    if (status.ok()) return mfp;
    // Send a stand-in so the schedule and event ids stay in step; the BU's
    // consumer counts its events as incomplete.
    unit_.errors->add(status.error);
    if (++rejected_mfps_ <= rejected_mfps_logged)
        log_warning("source MFP for chunk ", chunk, " rejected (", status.detail, "); sending ",
                    settings_.packing_factor, " missing fragments instead",
                    rejected_mfps_ == rejected_mfps_logged ? " (further rejections are only counted)" : "");
    std::vector<std::byte>& stand_in = stand_ins_[bu];
    const std::vector<std::uint16_t> sizes(settings_.packing_factor, 0);
    stand_in.resize(mfp_bytes(sizes));
    write_mfp(stand_in, {rank_, chunk * settings_.packing_factor, fragment_type_missing}, sizes);
    return stand_in;
}

bool Event_builder::run_cycle(std::uint64_t cycle) {
    const std::size_t bu_count = table_.bus().size();
    // RU: fetch the whole cycle up front, so every BU can learn its MFP's size
    // before the data moves (reference design, section III-B).
    if (unit_.source != nullptr) {
        for (std::size_t index = 0; index < bu_count; ++index) {
            const Rank bu = table_.bus()[index];
            const std::uint64_t chunk = chunk_for(cycle, index, bu_count);
            mfps_[bu] = next_mfp(chunk, bu);
            announced_[bu] = {chunk, settings_.packing_factor, 0, mfps_[bu].size()};
        }
    }
    if (!transport_.transfer(announce_sends_, announce_receives_)) return false;

    // BU: place every source's MFP before any arrives.
    if (unit_.output != nullptr) {
        const std::uint64_t chunk = chunk_for(cycle, table_.bu_index(rank_), bu_count);
        check_announcements(chunk);
        for (std::size_t slot = 0; slot < table_.rus().size(); ++slot)
            mfp_sizes_[slot] = received_[table_.rus()[slot]].bytes;
        Mep_layout layout = mep_layout(mfp_sizes_);
        mep_ = unit_.output->allocate(layout.total_bytes);
        write_mep_header(mep_, layout, chunk * settings_.packing_factor, settings_.packing_factor);
        offsets_ = std::move(layout.offsets);
    }

    if (!run_phases()) return false;

    if (unit_.source != nullptr)
        for (std::size_t index = 0; index < bu_count; ++index) unit_.source->release();
    if (unit_.output != nullptr) unit_.output->commit();
    return true;
}

bool Event_builder::run_phases() {
    const Rank units = table_.units();
    for (Rank phase = 0; phase < units; ++phase) {
        const Rank bu = send_target(rank_, phase, units);
        const Rank ru = receive_source(rank_, phase, units);
        const bool sends = unit_.source != nullptr && table_.runs_bu(bu);
        const bool receives = unit_.output != nullptr && table_.runs_ru(ru);
        Send send{bu, sends ? mfps_[bu] : std::span<const std::byte>{}};
        Receive receive{ru, {}};
        if (receives) {
            const std::size_t slot = static_cast<std::size_t>(
                std::lower_bound(table_.rus().begin(), table_.rus().end(), ru) - table_.rus().begin());
            receive.into = mep_.subspan(offsets_[slot], mfp_sizes_[slot]);
        }
        if ((sends || receives) &&
            !transport_.transfer({&send, sends ? 1u : 0u}, {&receive, receives ? 1u : 0u}))
            return false;
        if (unit_.barrier != nullptr && ++phases_run_ % settings_.barrier_every == 0 && !unit_.barrier->wait())
            return false;
    }
    return true;
}

void Event_builder::check_announcements(std::uint64_t chunk) const {
    for (const Rank ru : table_.rus()) {
        const Mfp_announcement& announced = received_[ru];
        const std::string from = "rank " + std::to_string(ru);
        if (announced.chunk != chunk)
            throw Transport_error(from + " announced MFP chunk " + std::to_string(announced.chunk) + ", expected " +
                                  std::to_string(chunk) + ": the units are out of step");
        if (announced.event_count != settings_.packing_factor)
            throw Transport_error(from + " packs " + std::to_string(announced.event_count) + " events per MFP, this unit " +
                                  std::to_string(settings_.packing_factor) +
                                  ": every unit needs the same --packing-factor");
        if (announced.bytes > max_mfp_bytes)
            throw Transport_error(from + " announced an MFP of " + std::to_string(announced.bytes) +
                                  " bytes, more than the limit of " + std::to_string(max_mfp_bytes));
    }
}

}  // namespace eb
