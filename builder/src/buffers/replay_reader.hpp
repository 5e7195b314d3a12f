#pragma once

#include <cstdint>
#include <string>

#include "buffers/buffer.hpp"

namespace eb {

// An MFP source whose MFPs come in event order from the run's first event
// on and which can put back the element it handed out last: a readout
// driver's ring, a file of MFPs. A unit joining a running set skips to
// where the set is by reading forward.
class Replay_reader : public Buffer_reader {
public:
    // Releases the MFPs before event `first_event_id`. An element without
    // a readable MFP header stops the skip (it is handed out next, for the
    // RU's check to reject). Throws if the MFPs start past that event or
    // end before it.
    void skip_to(std::uint64_t first_event_id) final;

protected:
    // Tells the writer where the skip goes, before reading forward (a
    // ring's writer may seek there); by default nobody to tell.
    virtual void announce_target(std::uint64_t /*first_event_id*/) {}
    // Puts back the element next() handed out last, unreleased.
    virtual void put_back() = 0;
    // Names the source in errors: "ring /eb-x-mfp", "--source-file f".
    virtual std::string description() const = 0;
};

}  // namespace eb
