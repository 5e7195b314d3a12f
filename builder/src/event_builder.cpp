#include "event_builder.hpp"

#include <string>

#include "mep_layout.hpp"
#include "schedule.hpp"

namespace eb {

Event_builder::Event_builder(Settings settings, Transport& transport, Buffer_reader& source, Buffer_writer& output)
    : settings_(settings),
      transport_(transport),
      source_(source),
      output_(output),
      rank_(transport.rank()),
      units_(transport.units()),
      mfps_(units_),
      announced_(units_),
      received_(units_),
      mfp_sizes_(units_) {
    for (Rank peer = 0; peer < units_; ++peer) {
        announce_sends_.push_back({peer, std::as_bytes(std::span(&announced_[peer], 1))});
        announce_receives_.push_back({peer, std::as_writable_bytes(std::span(&received_[peer], 1))});
    }
}

bool Event_builder::run() {
    for (std::uint64_t cycle = 0; settings_.cycles == 0 || cycle < settings_.cycles; ++cycle)
        if (!run_cycle(cycle)) return false;
    return true;
}

bool Event_builder::run_cycle(std::uint64_t cycle) {
    // RU: fetch the whole cycle up front, so every BU can learn its MFP's size
    // before the data moves (reference design, section III-B).
    for (Rank bu = 0; bu < units_; ++bu) {
        mfps_[bu] = source_.next();
        announced_[bu] = {chunk_for(cycle, bu, units_), settings_.packing_factor, 0, mfps_[bu].size()};
    }
    if (!transport_.transfer(announce_sends_, announce_receives_)) return false;

    // BU: place every source's MFP before any arrives.
    const std::uint64_t chunk = chunk_for(cycle, rank_, units_);
    check_announcements(chunk);
    for (Rank ru = 0; ru < units_; ++ru) mfp_sizes_[ru] = received_[ru].bytes;
    const Mep_layout layout = mep_layout(mfp_sizes_);
    const std::span<std::byte> mep = output_.allocate(layout.total_bytes);
    write_mep_header(mep, layout, chunk * settings_.packing_factor, settings_.packing_factor);

    for (Rank phase = 0; phase < units_; ++phase) {
        const Rank bu = send_target(rank_, phase, units_);
        const Rank ru = receive_source(rank_, phase, units_);
        const Send send{bu, mfps_[bu]};
        const Receive receive{ru, mep.subspan(layout.offsets[ru], mfp_sizes_[ru])};
        if (!transport_.transfer({&send, 1}, {&receive, 1})) return false;
    }

    for (Rank bu = 0; bu < units_; ++bu) source_.release();
    output_.commit();
    return true;
}

void Event_builder::check_announcements(std::uint64_t chunk) const {
    for (Rank ru = 0; ru < units_; ++ru) {
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
