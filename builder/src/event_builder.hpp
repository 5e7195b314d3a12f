#pragma once

#include <cstdint>
#include <vector>

#include "buffer.hpp"
#include "transport.hpp"
#include "wire_format.hpp"

namespace eb {

// The folded EB unit's run loop: the RU feeds MFPs from `source` into the
// linear-shifting schedule, the BU assembles the MEPs it is assigned and
// hands them to `output`. One cycle moves one MFP chunk per BU:
//   1. RU: take the cycle's N MFPs and announce their sizes to their BUs;
//      BU: take the N announcements, lay out the MEP, write its header.
//   2. N phases: in phase n send the MFP for BU (rank + n) mod N and receive
//      the MFP of RU (rank - n) mod N straight into its place in the MEP.
//   3. Release the MFPs, commit the MEP.
class Event_builder {
public:
    struct Settings {
        std::uint32_t packing_factor = 0;
        std::uint64_t cycles = 0;  // 0: until stopped
    };

    // `source` must let N MFPs be held at once.
    Event_builder(Settings settings, Transport& transport, Buffer_reader& source, Buffer_writer& output);

    // Returns true after the last cycle, false if stopped. Throws
    // Transport_error on a failed peer or a protocol violation.
    bool run();

private:
    bool run_cycle(std::uint64_t cycle);
    void check_announcements(std::uint64_t chunk) const;

    Settings settings_;
    Transport& transport_;
    Buffer_reader& source_;
    Buffer_writer& output_;
    Rank rank_;
    Rank units_;
    // Per-cycle scratch, sized once.
    std::vector<std::span<const std::byte>> mfps_;  // by destination BU
    std::vector<Mfp_announcement> announced_;       // by destination BU
    std::vector<Mfp_announcement> received_;        // by source RU
    std::vector<Send> announce_sends_;
    std::vector<Receive> announce_receives_;
    std::vector<std::uint64_t> mfp_sizes_;  // by source RU
};

}  // namespace eb
