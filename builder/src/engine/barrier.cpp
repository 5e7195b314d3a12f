#include "engine/barrier.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace eb {

Barrier::Barrier(Barrier_kind kind, Transport& transport, const std::vector<Rank>& participants)
    : participants_(participants), transport_(transport) {
    const auto me = std::find(participants.begin(), participants.end(), transport.rank());
    if (me == participants.end()) throw std::logic_error("Barrier: this unit is not a participant");
    const Barrier_role role = barrier_role(kind, static_cast<std::size_t>(me - participants.begin()), participants.size());
    for (const std::size_t child : role.children) children_.push_back(participants[child]);
    child_tokens_.resize(children_.size());
    parent_token_.resize(role.parent ? 1 : 0);
    // The spans point at token_ and the token vectors, sized once here.
    for (std::size_t i = 0; i < children_.size(); ++i) {
        to_children_.push_back({children_[i], std::as_bytes(std::span(&token_, 1))});
        from_children_.push_back({children_[i], std::as_writable_bytes(std::span(&child_tokens_[i], 1))});
    }
    if (role.parent) {
        parent_.push_back(participants[*role.parent]);
        to_parent_.push_back({participants[*role.parent], std::as_bytes(std::span(&token_, 1))});
        from_parent_.push_back({participants[*role.parent], std::as_writable_bytes(std::span(parent_token_))});
    }
}

bool Barrier::wait() {
    if (abandoned_) return true;
    abandoned_ = std::any_of(participants_.begin(), participants_.end(),
                             [&](Rank peer) { return transport_.lost(peer); });
    // Arrival: the whole subtree below, then report up.
    if (!from_children_.empty()) {
        if (!transport_.transfer({}, from_children_)) return false;
        take_tokens(children_, child_tokens_, "arrival");
    }
    token_ = token();
    if (!to_parent_.empty()) {
        if (!transport_.transfer(to_parent_, {}) || !transport_.transfer({}, from_parent_)) return false;
        take_tokens(parent_, parent_token_, "release");
    }
    // Release: everyone has arrived (or the barrier is abandoned); pass it down.
    token_ = token();
    if (!to_children_.empty() && !transport_.transfer(to_children_, {})) return false;
    count_ = static_cast<std::uint8_t>((count_ + 1) % abandon_token);
    return true;
}

void Barrier::take_tokens(const std::vector<Rank>& from, const std::vector<std::uint8_t>& tokens, const char* what) {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (transport_.lost(from[i]) || tokens[i] == abandon_token) {
            abandoned_ = true;
            continue;
        }
        // Bytes changed on the way, or a peer out of step: the link is
        // broken, the unit is not (the set goes on without that peer).
        if (tokens[i] != count_) {
            transport_.lose(from[i], Link_failure::error,
                            std::string("its barrier ") + what + " token " + std::to_string(tokens[i]) +
                                " came while at barrier " + std::to_string(count_) +
                                " (mod 255): out of step, or bytes changed on the way");
            abandoned_ = true;
        }
    }
}

}  // namespace eb
