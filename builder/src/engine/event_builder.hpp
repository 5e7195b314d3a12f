#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/barrier.hpp"
#include "engine/cycle_agreement.hpp"
#include "buffers/buffer.hpp"
#include "schedule/cycle_vote.hpp"
#include "base/histogram.hpp"
#include "formats/parse_error.hpp"
#include "schedule/rank_table.hpp"
#include "transport/transport.hpp"
#include "formats/wire_format.hpp"

namespace eb {

// An EB unit's run loop under one rank table (one epoch): its RU (if it runs
// one) feeds MFPs from `source` into the linear-shifting schedule, its BU (if
// any) assembles the MEPs it is assigned and hands them to `output`. One
// cycle moves one MFP chunk per live BU:
//   1. RU: take the cycle's MFPs (one per live BU), check each. The units
//      exchange cycle headers (Cycle_agreement): each learns the size of
//      every MFP it will receive, the votes and who lost whom. BU: lay out
//      the MEP, write its header.
//   2. The BU posts a receive for every RU's MFP straight at its place in
//      the MEP. N phases: in phase n the RU sends to BU (rank + n) mod N and
//      the BU waits for the MFP of RU (rank - n) mod N; pairs with a dummy
//      or a missing role idle. Phase 0 (each unit with itself) crosses no
//      link: its copy runs inside phase 1. A barrier every k phases run.
//   3. The units settle the cycle (Cycle_agreement): who is in it, what the
//      votes decide. Release the MFPs, commit the MEP (a unit put out
//      discards it); return what the set decided.
// With a receive window W (--receive-window) step 2 posts the receives of
// phases 0..W only, and each phase those of W - 1 phases later, so an RU
// (which sends on its BU's credit, over verbs) runs at most W phases ahead
// of its BU: ranks that drift apart without a barrier never put two MFPs
// on one BU's link at once.
// With receives_ahead (--verbs-depth 2) the RU also takes the next cycle's
// MFPs that its source has ready and announces their sizes in step 1; once
// step 3 decided to go on under this table, the BU lays out the next MEP
// and posts its receives (as step 2 would), so over verbs the next MFP
// meets its receive and credit on arrival. Only after the decision: a
// receive posted for a cycle that never runs could not be taken back
// without the queue pair, and the MEP it lies in is always the only one
// open.
// A MEP that lacks a readout stream of the run (the table's unread streams)
// holds no complete event: dropped or delivered flagged, as below.
// A lost peer is built around: its MFPs are missing from the MEPs (dropped,
// or delivered flagged incomplete, as are those of an unread source) and the chunks it would have built are
// dropped, all counted in `events_dropped`, once for the set: a BU in the
// cycle counts its own MEP, the unit whose proposal the set follows the
// chunks of the BUs out of it, and a unit put out counts nothing. A chunk
// whose count a unit cannot know (it sits the cycle out, not having heard
// a rank that proposal keeps in; or it leads and lost a BU since it
// proposed) goes to `events_in_doubt` instead: never counted twice.
class Event_builder {
public:
    struct Settings {
        std::uint32_t packing_factor = 0;
        std::uint32_t barrier_every = 1;
        std::uint32_t epoch = 1;
        bool drop_incomplete = true;  // false: deliver MEPs missing a lost source, flagged
        bool receives_ahead = false;  // --verbs-depth 2, above
        std::uint32_t receive_window = 0;  // --receive-window, above; 0: a cycle's receives at once
    };
    struct Unit {
        Buffer_reader* source = nullptr;  // set iff the rank runs an RU; must let B (receives_ahead: 2B) MFPs be held
        Buffer_writer* output = nullptr;  // set iff the rank runs a BU
        Barrier* barrier = nullptr;       // none: no barrier
        Parse_error_counts* errors = nullptr;  // counts rejected source MFPs; required with a source
        std::atomic<std::uint64_t>* events_dropped = nullptr;   // required
        std::atomic<std::uint64_t>* events_in_doubt = nullptr;  // required
        Histogram* phase_time = nullptr;    // optional
        Histogram* barrier_wait = nullptr;  // optional
    };

    Event_builder(Settings settings, const Rank_table& table, Transport& transport, Unit unit);
    // A cycle left unfinished (stopped, or a peer broke the protocol) first
    // cancels what it posted on the transport, then gives its MEP back to
    // the output, which the next session builds into.
    ~Event_builder();
    Event_builder(const Event_builder&) = delete;
    Event_builder& operator=(const Event_builder&) = delete;

    // Runs the cycle whose BU of index 0 builds chunk `cycle_chunk`, with this
    // unit's `vote`; `last`: the unit runs no cycle after it whatever the set
    // decides (the end of --events), so nothing goes ahead. Returns the set's
    // decision, or nullopt if stopped. Throws Transport_error on a protocol
    // violation by a peer.
    std::optional<Cycle_decision> run_cycle(std::uint64_t cycle_chunk, const Vote& vote, bool last = false);

    // Chunks per cycle: the number of live BUs.
    std::uint64_t chunks_per_cycle() const { return table_.bus().size(); }

private:
    // RU: the cycle's MFPs (those taken ahead first), then the next cycle's
    // that the source has ready, where receives go ahead.
    void take_mfps(std::uint64_t cycle_chunk);
    // Lays out the MEP of the cycle at `cycle_chunk` from the sizes the
    // headers announced for it (`ahead`: a cycle ahead, in next_bytes, and
    // only in room the output has now: false if it has none).
    bool lay_out_mep(std::uint64_t cycle_chunk, bool ahead);
    // Lays out the MEP's receives in phase order and posts those the window
    // lets go (all without one).
    void post_receives();
    // Posts the laid-out receives not posted yet that the window lets go
    // once `phase` begins (all without one).
    void post_receives_through(Rank phase);
    // Whether the sizes of this cycle's headers are those announced a cycle
    // ahead, which its MEP was laid out with; throws Transport_error if not.
    void check_announced(std::uint64_t cycle_chunk) const;
    // After a cycle the set goes on from under this table: lays out the
    // next MEP and posts its receives, if every source it reads announced.
    void post_next_cycle(std::uint64_t next_chunk);
    bool run_phases();
    // Who this unit sends to and receives from in `phase`, and whether it
    // does (a dummy, a missing role or a lost source: not).
    struct Phase_pair {
        Rank bu, ru;
        bool sends, receives;
    };
    Phase_pair phase_pair(Rank phase) const;
    void finish_cycle();
    // The source's MFP for `chunk` (built by `bu`), or a stand-in if it is
    // rejected; `ahead`: of the next cycle, whose stand-ins are kept apart.
    std::span<const std::byte> checked_mfp(std::span<const std::byte> mfp, std::uint64_t chunk, Rank bu, bool ahead);
    // Registers the source's and the output's memory for the data channel,
    // again only when a buffer's regions changed (a slot grew).
    void register_regions();
    static void register_buffer(Transport& transport, const Memory_regions& regions, std::uint64_t& version,
                                std::vector<std::unique_ptr<Registered_memory>>& registrations);

    Settings settings_;
    const Rank_table& table_;
    Transport& transport_;
    Unit unit_;
    Rank rank_;
    std::uint64_t phases_run_ = 0;
    std::uint64_t rejected_mfps_ = 0;
    // Per-cycle scratch, sized once, indexed by rank.
    std::vector<std::span<const std::byte>> mfps_;  // by destination BU
    std::vector<std::uint64_t> mfp_bytes_;          // by destination BU: the size of its MFP, or 0
    std::vector<std::uint64_t> next_mfp_bytes_;     // by destination BU: the same for the next cycle, 0 if not taken
    std::vector<std::span<const std::byte>> ahead_mfps_;  // by BU index: the next cycle's, taken ahead
    std::size_t ahead_count_ = 0;                         // of ahead_mfps_, those taken
    bool stand_in_side_ = false;  // which half of stand_ins_ this cycle uses; the next cycle's the other
    Cycle_agreement agreement_;
    std::vector<std::uint64_t> mfp_sizes_;          // by slot (index in table.sources())
    std::vector<bool> slot_missing_;                // by slot: the source is unread or its RU was lost
    std::vector<std::vector<std::byte>> stand_ins_;  // per destination BU, twice: MFP of missing fragments
    std::vector<std::unique_ptr<Registered_memory>> stand_in_registrations_;
    std::vector<std::unique_ptr<Registered_memory>> source_registrations_, output_registrations_;
    std::uint64_t source_version_ = 0, output_version_ = 0;  // of the regions registered; 0: none
    std::vector<Receive> data_receives_;  // the MFPs of this cycle's MEP, in the order of their phases
    std::size_t receives_posted_ = 0;     // the first of data_receives_ are posted
    bool data_posted_ = false;            // data operations posted and not all waited for
    std::vector<std::byte> missing_mfp_;  // a lost or unread source's slot in flagged MEPs
    std::vector<std::byte> stream_map_;   // encoded, the same in every MEP of the table
    bool lacks_streams_ = false;          // every MEP lacks a stream of the run
    std::span<std::byte> mep_;
    bool mep_open_ = false;               // allocated and neither committed nor discarded
    std::vector<std::uint64_t> offsets_;  // by slot
    bool mep_damaged_ = false;            // a source was lost while its MFP was arriving
    bool mep_ahead_ = false;              // the coming cycle's MEP is laid out and its receives posted
};

}  // namespace eb
