#pragma once

#include <cstdint>
#include <vector>

#include "barrier.hpp"
#include "buffer.hpp"
#include "parse_error.hpp"
#include "rank_table.hpp"
#include "transport.hpp"
#include "wire_format.hpp"

namespace eb {

// An EB unit's run loop: its RU (if it runs one) feeds MFPs from `source`
// into the linear-shifting schedule, its BU (if any) assembles the MEPs it is
// assigned and hands them to `output`. One cycle moves one MFP chunk per
// live BU:
//   1. RU: take the cycle's MFPs (one per live BU), check each, announce the
//      sizes; BU: take one announcement per live RU, lay out the MEP, write
//      its header.
//   2. N phases: in phase n the RU sends to BU (rank + n) mod N and the BU
//      receives from RU (rank - n) mod N straight into its place in the MEP;
//      pairs with a dummy or a missing role idle. A barrier every k phases.
//   3. Release the MFPs, commit the MEP.
class Event_builder {
public:
    struct Settings {
        std::uint32_t packing_factor = 0;
        std::uint64_t cycles = 0;  // 0: until stopped
        std::uint32_t barrier_every = 1;
    };
    struct Unit {
        Buffer_reader* source = nullptr;  // set iff the rank runs an RU; must let B MFPs be held
        Buffer_writer* output = nullptr;  // set iff the rank runs a BU
        Barrier* barrier = nullptr;       // none: no barrier
        Parse_error_counts* errors = nullptr;  // counts rejected source MFPs; required with a source
    };

    Event_builder(Settings settings, const Rank_table& table, Transport& transport, Unit unit);

    // Returns true after the last cycle, false if stopped. Throws
    // Transport_error on a failed peer or a protocol violation.
    bool run();

private:
    bool run_cycle(std::uint64_t cycle);
    bool run_phases();
    std::span<const std::byte> next_mfp(std::uint64_t chunk, Rank bu);
    void check_announcements(std::uint64_t chunk) const;

    Settings settings_;
    const Rank_table& table_;
    Transport& transport_;
    Unit unit_;
    Rank rank_;
    std::uint64_t phases_run_ = 0;
    std::uint64_t rejected_mfps_ = 0;
    // Per-cycle scratch, sized once, indexed by rank.
    std::vector<std::span<const std::byte>> mfps_;  // by destination BU
    std::vector<Mfp_announcement> announced_;       // by destination BU
    std::vector<Mfp_announcement> received_;        // by source RU
    std::vector<Send> announce_sends_;
    std::vector<Receive> announce_receives_;
    std::vector<std::uint64_t> mfp_sizes_;          // by slot (index in table.rus())
    std::vector<std::vector<std::byte>> stand_ins_;  // per destination BU: MFP of missing fragments
    std::span<std::byte> mep_;
    std::vector<std::uint64_t> offsets_;  // by slot
};

}  // namespace eb
