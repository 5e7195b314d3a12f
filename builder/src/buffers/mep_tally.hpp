#pragma once

#include <cstdint>
#include <string>

namespace eb {

// Where an output reports the MEPs it delivered. The unit's status implements
// it, so the data path reports what it did without including telemetry.
class Mep_tally {
public:
    virtual ~Mep_tally() = default;

    virtual void add_mep(std::uint64_t events_complete, std::uint64_t events_incomplete, std::uint64_t bytes) = 0;
    // A MEP assembled and dropped here because the output had no room for it
    // in time: its events count as dropped.
    virtual void add_discarded_mep(std::uint64_t events) = 0;
    // A damaged MEP's first problem, for the unit's last_error.
    virtual void note_problem(std::string problem) = 0;
};

}  // namespace eb
