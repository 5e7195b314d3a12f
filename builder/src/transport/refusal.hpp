#pragma once

#include <cstddef>
#include <string_view>

#include "base/kind_counts.hpp"

namespace eb {

// Why this unit refused a data connection (docs/control-api.md, "Data
// connections"): a wrong proof of the run's data key, another rank table
// epoch (a peer switching at another moment: it dials again), a hello that
// does not fit the table, not a hello of this protocol, or no whole hello
// within the hello timeout (or by the time the unit finished connecting).
enum class Refusal { key, epoch, table, protocol, slow };
inline constexpr std::size_t refusal_kinds = 5;
inline std::string_view refusal_name(Refusal refusal) {
    switch (refusal) {
        case Refusal::key: return "key";
        case Refusal::epoch: return "epoch";
        case Refusal::table: return "table";
        case Refusal::protocol: return "protocol";
        case Refusal::slow: return "slow";
    }
    return "protocol";
}

// Refusals counted across sessions; written by the connecting thread, read
// by any.
using Refusal_counts = Kind_counts<Refusal, refusal_kinds>;

}  // namespace eb
