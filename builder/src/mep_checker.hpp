#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace eb {

// Outcome of checking one MEP. Every event of the MEP is counted exactly once,
// as complete or as incomplete.
struct Mep_verdict {
    std::uint64_t events_complete = 0;
    std::uint64_t events_incomplete = 0;
    std::string first_problem;  // empty when every event is complete
};

// Checks a MEP event by event, as the trigger farm would need it: an event is
// complete when every expected source holds a fragment of it with the right
// event id, source id and generator payload. Damage confined to one fragment
// costs only that event; damage to a header costs every event it describes.
class Mep_checker {
public:
    // `sources`: the source id expected in each MEP slot, in order.
    Mep_checker(std::vector<std::uint32_t> sources, std::uint32_t events_per_mep);

    Mep_verdict check(std::span<const std::byte> mep);

private:
    // Checks the MFP in `slot` (which may extend to the MEP end) and clears
    // event_ok_ for every event it fails. Returns the MFP's byte count.
    std::uint64_t check_mfp(std::span<const std::byte> slot, std::uint32_t source_id,
                            std::uint64_t first_event_id, std::string& problem);
    void fail_events(std::size_t from, std::size_t to);

    std::vector<std::uint32_t> sources_;
    std::uint32_t events_per_mep_;
    std::vector<std::uint8_t> event_ok_;  // per event of the MEP being checked; reused
};

}  // namespace eb
