#pragma once

#include <cstdint>
#include <vector>

#include "schedule/barrier_plan.hpp"
#include "transport/transport.hpp"

namespace eb {

// A barrier among `participants` (ranks, ascending, this unit among them),
// carried by one-byte tokens over the transport: no unit returns from wait()
// before every participant has called it. The token is the barrier's count
// mod 255, so units that fall out of step are caught, not silently mixed up.
//
// A lost participant would hold everyone forever, so the barrier is
// abandoned instead: a unit that knows of a lost participant, or receives
// the abandon token, sends the abandon token on every tree edge of that
// barrier, in place of its count, and no tokens after it. Every edge thus
// carries exactly one token each way up to the barrier the whole tree
// abandons together, and the streams stay in step. Barriers only shape the
// traffic; building goes on without them until the next rank table.
class Barrier {
public:
    Barrier(Barrier_kind kind, Transport& transport, const std::vector<Rank>& participants);

    // Returns false if stopped first. A token from another barrier loses
    // its sender (and abandons the barrier, as any loss does).
    bool wait();
    bool abandoned() const { return abandoned_; }

private:
    // Reads `tokens` from `from` (lost ones count as abandon tokens).
    void take_tokens(const std::vector<Rank>& from, const std::vector<std::uint8_t>& tokens, const char* what);
    std::uint8_t token() const { return abandoned_ ? abandon_token : count_; }

    static constexpr std::uint8_t abandon_token = 255;
    bool abandoned_ = false;
    std::uint8_t token_ = 0;  // what this unit sends at the current barrier
    std::vector<Rank> parent_;  // zero or one
    std::vector<Rank> participants_;

    Transport& transport_;
    std::uint8_t count_ = 0;  // mod 255
    std::vector<Rank> children_;
    std::vector<Send> to_children_, to_parent_;
    std::vector<Receive> from_children_, from_parent_;
    std::vector<std::uint8_t> child_tokens_, parent_token_;
};

}  // namespace eb
