#pragma once

#include <cstdint>
#include <vector>

#include "barrier_plan.hpp"
#include "transport.hpp"

namespace eb {

// A barrier among `participants` (ranks, ascending, this unit among them),
// carried by one-byte tokens over the transport: no unit returns from wait()
// before every participant has called it. The token is the barrier's count
// mod 256, so units that fall out of step are caught, not silently mixed up.
class Barrier {
public:
    Barrier(Barrier_kind kind, Transport& transport, const std::vector<Rank>& participants);

    // Returns false if stopped first; throws Transport_error on a failed peer
    // or a token from another barrier.
    bool wait();

private:
    void check_tokens(const std::vector<std::uint8_t>& tokens, const char* what) const;

    Transport& transport_;
    std::uint8_t count_ = 0;
    std::vector<Rank> children_;
    std::vector<Send> to_children_, to_parent_;
    std::vector<Receive> from_children_, from_parent_;
    std::vector<std::uint8_t> child_tokens_, parent_token_;
};

}  // namespace eb
