#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "formats/event_model.hpp"
#include "base/data_threads.hpp"
#include "formats/parse_error.hpp"
#include "formats/stream_map.hpp"

namespace eb {

// Outcome of checking one MEP. Every event of the MEP is counted exactly once,
// as complete or as incomplete.
struct Mep_verdict {
    std::uint64_t events_complete = 0;
    std::uint64_t events_incomplete = 0;
    std::string first_problem;  // empty when every event is complete
};

// Of one readout stream, over the MEPs checked: the events that held its
// fragment intact, and those that lacked it (a stream the MEP lacks, its
// slot's fragment missing or damaged, or the whole MEP rejected).
struct Stream_tally {
    std::uint64_t held = 0;
    std::uint64_t lacked = 0;

    friend bool operator==(const Stream_tally&, const Stream_tally&) = default;
};

// Checks a MEP event by event, as the trigger farm would need it: an event is
// complete when every expected source holds a fragment of it with the type,
// size and payload the generator made, and the MEP lacks no readout stream
// of the run. A malformed MEP frame or MFP, or a stream map other than the
// expected one, costs every event it describes and is counted by kind in
// `errors`; a damaged fragment costs only its event.
class Mep_checker {
public:
    // `sources`: the source id expected in each MEP slot, in order;
    // `streams`: the stream map every MEP must carry (empty: one with no
    // streams named, a list per slot); `threads`: the slots are checked in
    // parts on them.
    Mep_checker(std::vector<std::uint32_t> sources, std::uint32_t events_per_mep, const Event_model& model,
                Parse_error_counts& errors, Stream_map streams = {}, Data_threads* threads = nullptr);

    Mep_verdict check(std::span<const std::byte> mep);

    // A new rank table: other sources fill the slots from the next MEP on,
    // with another stream map.
    void expect_sources(std::vector<std::uint32_t> sources, Stream_map streams = {});

    // By stream name, every stream of every map expected so far.
    const std::map<std::string, Stream_tally>& stream_tallies() const { return tallies_; }

    // Also checks that MEPs come in sequence: the first starts at event
    // `first`, each next one `stride` events later. A gap is counted as
    // wrong_event_range and reported; checking goes on from the MEP received.
    void expect_sequence(std::uint64_t first, std::uint64_t stride) {
        next_first_event_ = first;
        stride_ = stride;
    }
    // The BU dropped the next MEP of the sequence (counted in its
    // events_dropped): the one after it comes a stride later.
    void skip_mep() { next_first_event_ += stride_; }
    // For a reader that does not see the BU's drops (a consumer of its
    // ring): a gap of whole MEPs ahead is MEPs the BU dropped, counted in
    // skipped_meps(), not an error. A MEP behind, or off the stride, still is.
    void accept_dropped_meps() { dropped_meps_accepted_ = true; }
    std::uint64_t skipped_meps() const { return skipped_meps_; }

private:
    // What one thread found in its slots: by event, whether all of them
    // held it intact; the first problem.
    struct Part {
        std::vector<std::uint8_t> event_ok;
        std::string problem;
    };
    // Returns how many of the slot's fragments are intact; clears the
    // part's event_ok of the others.
    std::uint64_t check_mfp(std::span<const std::byte> slot, std::size_t index, std::uint64_t first_event_id,
                            Part& part);
    // The MEP's map against the expected one; a failed status when it differs.
    Parse_status check_stream_map(std::span<const std::byte> map, std::uint32_t slots);

    Event_model model_;
    std::vector<std::uint32_t> sources_;
    Stream_map streams_;
    std::vector<std::byte> encoded_streams_;  // streams_, as a BU writes it
    Stream_map got_streams_;  // reused
    std::map<std::string, Stream_tally> tallies_;
    std::vector<std::vector<Stream_tally*>> held_tallies_;  // per slot, into tallies_
    std::vector<Stream_tally*> lacked_tallies_;
    std::string lacks_text_;  // the problem of a MEP that lacks streams
    // Every expected stream lacked by every event of the MEP (it was rejected).
    void count_all_lacked();
    std::vector<std::uint64_t> intact_;  // per slot of the MEP being checked
    std::vector<Fragment_sizes> sizes_;  // per slot
    std::uint32_t events_per_mep_;
    Parse_error_counts& errors_;
    std::uint64_t next_first_event_ = 0;
    std::uint64_t stride_ = 0;  // 0: MEP order not checked
    bool dropped_meps_accepted_ = false;
    std::uint64_t skipped_meps_ = 0;
    Data_threads* threads_;  // null: the caller's thread alone
    std::vector<Part> parts_;  // reused
};

}  // namespace eb
