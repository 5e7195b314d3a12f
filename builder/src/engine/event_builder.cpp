#include "engine/event_builder.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <stdexcept>
#include <string>

#include "base/log.hpp"
#include "engine/mep_stream_map.hpp"
#include "formats/mep_layout.hpp"
#include "formats/mfp.hpp"
#include "formats/mfp_parser.hpp"
#include "schedule/schedule.hpp"

namespace eb {
namespace {
// Beyond this many rejected source MFPs only the counters keep track.
constexpr std::uint64_t rejected_mfps_logged = 10;

using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
}
}  // namespace

Event_builder::Event_builder(Settings settings, const Rank_table& table, Transport& transport, Unit unit)
    : settings_(settings),
      table_(table),
      transport_(transport),
      unit_(unit),
      rank_(transport.rank()),
      mfps_(table.units()),
      mfp_bytes_(table.units()),
      next_mfp_bytes_(table.units()),
      ahead_mfps_(table.bus().size()),
      agreement_({settings.packing_factor, settings.epoch, unit.output != nullptr}, table, transport),
      stand_ins_(2 * table.units()) {
    if ((unit.source != nullptr) != table.runs_ru(rank_) || (unit.output != nullptr) != table.runs_bu(rank_) ||
        (unit.source != nullptr && unit.errors == nullptr) || unit.events_dropped == nullptr || unit.events_in_doubt == nullptr ||
        settings.barrier_every == 0 || !table.live(rank_))
        throw std::logic_error("Event_builder: the unit's buffers do not match its roles");
    if (table.runs_bu(rank_)) {
        mfp_sizes_.resize(table.sources().size());
        slot_missing_.resize(table.sources().size());
        const Stream_map streams = mep_stream_map(table);
        stream_map_ = encode_stream_map(streams);
        lacks_streams_ = streams.lacks_streams();
    }
    const std::vector<std::uint16_t> no_fragments(settings.packing_factor, 0);
    missing_mfp_.resize(mfp_bytes(no_fragments));
}

Event_builder::~Event_builder() {
    if (data_posted_) transport_.quiesce();  // before the memory goes back to the buffers
    if (mep_open_) unit_.output->discard();
}

void Event_builder::register_buffer(Transport& transport, const Memory_regions& regions, std::uint64_t& version,
                                    std::vector<std::unique_ptr<Registered_memory>>& registrations) {
    if (regions.version() == version) return;
    registrations.clear();
    for (const std::span<const std::byte> span : regions.spans())
        registrations.push_back(transport.register_memory(span));
    version = regions.version();
}

void Event_builder::register_regions() {
    if (unit_.source != nullptr)
        register_buffer(transport_, unit_.source->regions(), source_version_, source_registrations_);
    if (unit_.output != nullptr)
        register_buffer(transport_, unit_.output->regions(), output_version_, output_registrations_);
}

std::optional<Cycle_decision> Event_builder::run_cycle(std::uint64_t cycle_chunk, const Vote& vote, bool last) {
    if (unit_.source != nullptr) take_mfps(cycle_chunk);
    for (const Rank bu : table_.bus()) mfp_bytes_[bu] = unit_.source != nullptr ? mfps_[bu].size() : 0;
    if (!agreement_.exchange_headers(cycle_chunk, vote, mfp_bytes_, next_mfp_bytes_)) return std::nullopt;
    if (unit_.output != nullptr) {
        if (mep_ahead_) {
            check_announced(cycle_chunk);
        } else {
            lay_out_mep(cycle_chunk, false);
            post_receives();
        }
    }
    if (!run_phases() || !agreement_.settle(cycle_chunk)) return std::nullopt;
    finish_cycle();
    stand_in_side_ = !stand_in_side_;
    const Cycle_decision& decision = agreement_.decision();
    mep_ahead_ = false;
    if (settings_.receives_ahead && unit_.output != nullptr && !last && decision.switch_to == 0 && !decision.stop &&
        !decision.pause)
        post_next_cycle(cycle_chunk + chunks_per_cycle());
    return decision;
}

void Event_builder::take_mfps(std::uint64_t cycle_chunk) {
    // RU: fetch the whole cycle up front, so every BU can learn its MFP's size
    // before the data moves (reference design, section III-B).
    const std::vector<Rank>& bus = table_.bus();
    for (std::size_t index = 0; index < bus.size(); ++index) {
        const Rank bu = bus[index];
        mfps_[bu] = index < ahead_count_ ? ahead_mfps_[index]
                                         : checked_mfp(unit_.source->next(), cycle_chunk + index, bu, false);
    }
    ahead_count_ = 0;
    std::fill(next_mfp_bytes_.begin(), next_mfp_bytes_.end(), 0);
    if (!settings_.receives_ahead) return;
    // Only what is there now: waiting for the next cycle's data would hold
    // this one back, and a ring that holds less than two cycles never fills.
    const std::uint64_t next_chunk = cycle_chunk + bus.size();
    while (ahead_count_ < bus.size()) {
        const std::span<const std::byte> mfp = unit_.source->next_if_ready();
        if (mfp.empty()) break;
        const Rank bu = bus[ahead_count_];
        ahead_mfps_[ahead_count_] = checked_mfp(mfp, next_chunk + ahead_count_, bu, true);
        next_mfp_bytes_[bu] = ahead_mfps_[ahead_count_].size();
        ++ahead_count_;
    }
}

std::span<const std::byte> Event_builder::checked_mfp(std::span<const std::byte> mfp, std::uint64_t chunk, Rank bu,
                                                      bool ahead) {
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
    // The next cycle's stand-ins are the other half's, this cycle's still being sent.
    std::vector<std::byte>& stand_in = stand_ins_[bu + (stand_in_side_ != ahead ? table_.units() : 0)];
    const std::vector<std::uint16_t> sizes(settings_.packing_factor, 0);
    if (stand_in.empty()) {  // always this size: it never moves once registered
        stand_in.resize(mfp_bytes(sizes));
        stand_in_registrations_.push_back(transport_.register_memory(stand_in));
    }
    write_mfp(stand_in, {rank_, chunk * settings_.packing_factor, fragment_type_missing}, sizes);
    return stand_in;
}

bool Event_builder::lay_out_mep(std::uint64_t cycle_chunk, bool ahead) {
    const std::uint64_t chunk = cycle_chunk + table_.bu_index(rank_);
    bool missing = lacks_streams_;
    for (std::size_t slot = 0; slot < table_.sources().size(); ++slot) {
        const Rank source = table_.sources()[slot];
        slot_missing_[slot] = table_.source_unread(source) || transport_.lost(source);
        missing = missing || slot_missing_[slot];
        const Cycle_header& header = agreement_.header(source);
        mfp_sizes_[slot] = slot_missing_[slot] ? missing_mfp_.size() : ahead ? header.next_bytes : header.bytes;
    }
    Mep_layout layout = mep_layout(mfp_sizes_, stream_map_.size());
    if (layout.total_bytes > unit_.output->max_element()) {
        // Each announced size is bounded; their sum must be too, before allocating it.
        const auto largest = std::max_element(mfp_sizes_.begin(), mfp_sizes_.end()) - mfp_sizes_.begin();
        throw Transport_error("the MFPs announced for chunk " + std::to_string(chunk) + " make a MEP of " +
                              std::to_string(layout.total_bytes) + " bytes, over the " +
                              std::to_string(unit_.output->max_element()) +
                              " this unit's output takes (largest: rank " + std::to_string(table_.sources()[largest]) +
                              ", " + std::to_string(mfp_sizes_[largest]) +
                              " bytes); raise --ring-mib or lower --packing-factor");
    }
    // Ahead, a BU late for its output (a consumer behind) waits after the
    // headers as before, so its RUs hold their MFPs for it and count that.
    mep_ = ahead ? unit_.output->allocate_within(layout.total_bytes, std::chrono::milliseconds(0))
                 : unit_.output->allocate(layout.total_bytes);
    if (mep_.data() == nullptr) return false;
    mep_open_ = true;
    write_mep_header(mep_, layout, chunk * settings_.packing_factor, settings_.packing_factor, settings_.epoch,
                     stream_map_);
    offsets_ = std::move(layout.offsets);
    mep_damaged_ = false;
    if (!missing || settings_.drop_incomplete) return true;
    // Flagged delivery: a lost or unread source's slot holds an MFP of missing fragments.
    const std::vector<std::uint16_t> sizes(settings_.packing_factor, 0);
    for (std::size_t slot = 0; slot < slot_missing_.size(); ++slot)
        if (slot_missing_[slot])
            write_mfp(mep_.subspan(offsets_[slot], missing_mfp_.size()),
                      {table_.sources()[slot], chunk * settings_.packing_factor, fragment_type_missing}, sizes);
    return true;
}

void Event_builder::post_receives() {
    register_regions();
    // An RDMA transport lands each MFP straight at its offset on arrival.
    // Without a window every receive of the MEP is posted before any send
    // of the cycle; this unit's own (phase 0) always comes with the first.
    const Rank units = table_.units();
    data_receives_.clear();
    for (Rank phase = 0; phase < units; ++phase) {
        const Rank ru = receive_source(rank_, phase, units);
        if (!table_.runs_ru(ru)) continue;
        const std::size_t slot = table_.source_slot(ru);
        if (!slot_missing_[slot]) data_receives_.push_back({ru, mep_.subspan(offsets_[slot], mfp_sizes_[slot])});
    }
    receives_posted_ = 0;
    data_posted_ = true;
    post_receives_through(units > 1 ? 1 : 0);
}

void Event_builder::post_receives_through(Rank phase) {
    // The window's last phase; a cycle's at once without one.
    const std::uint64_t last_phase =
        settings_.receive_window == 0 ? table_.units() : std::uint64_t{phase} + settings_.receive_window - 1;
    std::size_t through = receives_posted_;
    while (through < data_receives_.size() &&
           receive_phase(rank_, data_receives_[through].peer, table_.units()) <= last_phase)
        ++through;
    if (through == receives_posted_) return;
    transport_.post_data({}, std::span(data_receives_).subspan(receives_posted_, through - receives_posted_));
    receives_posted_ = through;
}

void Event_builder::check_announced(std::uint64_t cycle_chunk) const {
    for (std::size_t slot = 0; slot < table_.sources().size(); ++slot) {
        const Rank source = table_.sources()[slot];
        if (slot_missing_[slot] || transport_.lost(source)) continue;  // lost since: the phase finds its slot damaged
        const std::uint64_t bytes = agreement_.header(source).bytes;
        if (bytes != mfp_sizes_[slot])
            throw Transport_error("rank " + std::to_string(source) + " announced an MFP of " + std::to_string(bytes) +
                                  " bytes for chunk " + std::to_string(cycle_chunk + table_.bu_index(rank_)) +
                                  " where it announced " + std::to_string(mfp_sizes_[slot]) +
                                  " a cycle ahead: the units speak different protocols");
    }
}

void Event_builder::post_next_cycle(std::uint64_t next_chunk) {
    for (const Rank source : table_.sources())
        if (!table_.source_unread(source) && !transport_.lost(source) && agreement_.header(source).next_bytes == 0)
            return;  // its RU did not have that MFP yet: laid out after the next headers
    if (!lay_out_mep(next_chunk, true)) return;  // no room now: laid out after the next headers
    post_receives();
    mep_ahead_ = true;
}

bool Event_builder::run_phases() {
    const Rank units = table_.units();
    register_regions();  // the RU's source; the BU's output was registered with its receives
    // Phase 0 pairs every unit with itself: no link carries it. Its copy is
    // made in phase 1, once that phase's MFP is on the wire, so it costs no
    // phase, wait or barrier of its own.
    const Rank first_phase = units > 1 ? 1 : 0;
    for (Rank phase = first_phase; phase < units; ++phase) {
        if (settings_.receive_window != 0 && unit_.output != nullptr) post_receives_through(phase);
        std::array<Rank, 2> sent_to{}, received_from{};
        std::size_t sends = 0, receives = 0;
        const auto take_part = [&](Rank pairing) {
            const Phase_pair pair = phase_pair(pairing);
            if (pair.sends) {
                const Send send{pair.bu, mfps_[pair.bu]};
                transport_.post_data({&send, 1}, {});
                sent_to[sends++] = pair.bu;
            }
            if (pair.receives) received_from[receives++] = pair.ru;
        };
        const auto phase_start = Clock::now();
        take_part(phase);
        if (phase == 1) take_part(0);  // after the wire's send: the copy overlaps it
        if ((sends != 0 || receives != 0) &&
            !transport_.wait_data(std::span(sent_to).first(sends), std::span(received_from).first(receives)))
            return false;
        // Lost while its MFP was on the way: the slot is part-written.
        for (const Rank ru : std::span(received_from).first(receives))
            if (transport_.lost(ru)) mep_damaged_ = true;
        const auto phase_end = Clock::now();
        if (unit_.phase_time != nullptr) unit_.phase_time->observe(seconds_between(phase_start, phase_end));
        // The proposals that end the cycle are its last barrier.
        if (unit_.barrier != nullptr && phase + 1 < units && ++phases_run_ % settings_.barrier_every == 0) {
            if (!unit_.barrier->wait()) return false;
            if (unit_.barrier_wait != nullptr) unit_.barrier_wait->observe(seconds_between(phase_end, Clock::now()));
        }
    }
    data_posted_ = false;
    return true;
}

Event_builder::Phase_pair Event_builder::phase_pair(Rank phase) const {
    const Rank units = table_.units();
    Phase_pair pair{send_target(rank_, phase, units), receive_source(rank_, phase, units), false, false};
    pair.sends = unit_.source != nullptr && table_.runs_bu(pair.bu);
    if (unit_.output != nullptr && table_.runs_ru(pair.ru)) pair.receives = !slot_missing_[table_.source_slot(pair.ru)];
    return pair;
}

void Event_builder::finish_cycle() {
    if (unit_.source != nullptr)
        for (std::size_t index = 0; index < table_.bus().size(); ++index) unit_.source->release();
    // The chunks of BUs out of the cycle are built nowhere; the unit the set
    // follows counts them, whatever its roles, and those it cannot know of
    // (its own chunk it counts below).
    for (const Rank bu : table_.bus()) {
        if (bu == rank_) continue;
        if (agreement_.leads() && !agreement_.in_cycle(bu)) unit_.events_dropped->fetch_add(settings_.packing_factor);
        else if (agreement_.chunk_in_doubt(bu)) unit_.events_in_doubt->fetch_add(settings_.packing_factor);
    }
    if (unit_.output == nullptr) return;
    mep_open_ = false;  // committed or discarded below
    const bool missing =
        lacks_streams_ || std::find(slot_missing_.begin(), slot_missing_.end(), true) != slot_missing_.end();
    if (agreement_.out_of_set()) {
        unit_.output->discard();  // its chunk is the set's to count
        if (agreement_.chunk_in_doubt(rank_)) unit_.events_in_doubt->fetch_add(settings_.packing_factor);
    } else if (mep_damaged_ || (missing && settings_.drop_incomplete)) {
        unit_.output->discard();
        unit_.events_dropped->fetch_add(settings_.packing_factor);
    } else if (missing) {
        unit_.output->commit_incomplete();
    } else {
        unit_.output->commit();
    }
}

}  // namespace eb
