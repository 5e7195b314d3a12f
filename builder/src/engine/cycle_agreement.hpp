#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "schedule/cycle_membership.hpp"
#include "schedule/cycle_vote.hpp"
#include "schedule/rank_table.hpp"
#include "transport/transport.hpp"
#include "formats/wire_format.hpp"

namespace eb {

// The control half of a cycle: two all-to-all rounds on the control channel.
//   1. Before the data: cycle messages, to each live unit the header (the
//      size of the MFP for it, this unit's votes) and the ranks this unit
//      has lost.
//   2. After the data, before any MEP is committed: proposals, who is out
//      of the cycle and the decision of the votes of those in
//      (cycle_membership.hpp). Every unit follows the lowest rank's proposal
//      it heard, loses the ranks it puts out, and takes its decision. So the
//      units of a set decide alike, and count every chunk once, even when
//      one of them lost a peer the others still see (docs/control-api.md,
//      "One set"). As every unit waits for every other's proposal, this
//      round is also the cycle's last barrier.
class Cycle_agreement {
public:
    struct Settings {
        std::uint32_t packing_factor = 0;
        std::uint32_t epoch = 1;
        bool has_output = false;  // this unit runs a BU: RUs announce an MFP for it
    };
    Cycle_agreement(Settings settings, const Rank_table& table, Transport& transport);

    // Round 1 for the cycle at `cycle_chunk`. `mfp_bytes`: by rank, the size
    // of this unit's MFP for that BU (0: none); `next_mfp_bytes` the same
    // for the next cycle, where this unit has those MFPs already (0: not
    // announced). Returns false if stopped; throws Transport_error on a
    // header that breaks the protocol.
    bool exchange_headers(std::uint64_t cycle_chunk, const Vote& vote, std::span<const std::uint64_t> mfp_bytes,
                          std::span<const std::uint64_t> next_mfp_bytes);
    // The header a rank not lost sent in round 1.
    const Cycle_header& header(Rank from) const { return headers_[from]; }

    // Round 2, once the cycle's data moved. Returns false if stopped.
    bool settle(std::uint64_t cycle_chunk);
    // What the last settle() decided: whether the proposal followed keeps
    // `rank` in the cycle (a rank it keeps builds its chunk, if it reads it).
    bool in_cycle(Rank rank) const { return in_cycle_[rank]; }
    // This unit's proposal is the one followed: it counts the chunks of the
    // BUs out of the cycle, so they are counted once.
    bool leads() const { return leads_; }
    // This unit is out of the cycle: a proposal put it out, or it lost every
    // peer of a set of three or more (it counts nothing until a new table);
    // or it sits this one cycle out (cut from the leader: Leader).
    bool out_of_set() const { return !in_cycle_[rank_]; }
    // Whether `rank`'s chunk of this cycle may be counted by nobody: this
    // unit sits the cycle out (a proposal it did not hear may keep it in);
    // or, where this unit's own proposal is followed, that proposal keeps the
    // peer in but this unit lost it since (it may or may not have read the
    // proposal and built its chunk), or puts it out while this unit sits the
    // cycle out (its proposal may have reached nobody).
    bool chunk_in_doubt(Rank rank) const { return chunk_in_doubt_[rank]; }
    const Cycle_decision& decision() const { return decision_; }

private:
    void read_headers(std::uint64_t cycle_chunk);
    void check_header(Rank from, std::uint64_t cycle_chunk) const;
    void propose();
    void read_proposals();
    void follow(std::uint64_t cycle_chunk);
    void lose_corrupted(Rank peer, const char* what);
    std::span<std::byte> slot(std::vector<std::byte>& messages, Rank rank, std::size_t bytes) const;

    Settings settings_;
    const Rank_table& table_;
    Transport& transport_;
    Rank rank_;
    std::size_t cycle_message_bytes_, proposal_bytes_;
    // Sized once; messages indexed by rank.
    std::vector<std::byte> sent_, arrived_;                      // cycle messages
    std::vector<std::byte> proposal_, proposals_arrived_;        // proposals (this unit's goes to all)
    std::vector<Send> message_sends_, proposal_sends_;
    std::vector<Receive> message_receives_, proposal_receives_;
    std::vector<Cycle_header> headers_;
    std::vector<std::optional<Membership>> lost_lists_;    // by sender; this unit's own as it stands
    std::vector<std::optional<Membership>> outs_;          // proposals' out lists, by proposer
    std::vector<Cycle_decision> decisions_;                // proposals' decisions, by proposer
    std::vector<Vote> votes_;
    Broken_links reported_before_;
    std::vector<bool> in_cycle_, chunk_in_doubt_;  // by rank
    bool leads_ = false;
    bool was_out_ = false;  // in the cycle before: its warning is logged once
    Cycle_decision decision_;
};

}  // namespace eb
