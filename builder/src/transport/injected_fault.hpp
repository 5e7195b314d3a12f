#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "base/rank.hpp"

namespace eb {

// A fault a unit injects into its own verbs traffic (--inject-fault), for the
// fault suite and a site's qualification of its HCAs: real queue pairs in
// real states, nothing emulated. The operator never sets it.
//   qp-error:R:N   once this unit posted its N-th data receive from rank R,
//                  that peer's data queue pair is moved to the error state
//                  (mid-cycle: a receive is posted, the peer's MFP on its way)
//   short-mfp:R:N  the N-th MFP this unit sends to rank R goes 8 bytes short
//                  of the size its header announced
struct Injected_fault {
    enum class Kind { qp_error, short_mfp };
    Kind kind = Kind::qp_error;
    Rank peer = 0;
    std::uint64_t after = 1;  // counted from 1, per peer, from the session's start
};

// `text` as --inject-fault takes it; the error names the flag and the form.
std::variant<Injected_fault, std::string> parse_injected_fault(std::string_view text);
std::string injected_fault_text(const Injected_fault& fault);

}  // namespace eb
