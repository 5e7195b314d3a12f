#include "barrier.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace eb {

Barrier::Barrier(Barrier_kind kind, Transport& transport, const std::vector<Rank>& participants)
    : transport_(transport) {
    const auto me = std::find(participants.begin(), participants.end(), transport.rank());
    if (me == participants.end()) throw std::logic_error("Barrier: this unit is not a participant");
    const Barrier_role role = barrier_role(kind, static_cast<std::size_t>(me - participants.begin()), participants.size());
    for (const std::size_t child : role.children) children_.push_back(participants[child]);
    child_tokens_.resize(children_.size());
    parent_token_.resize(role.parent ? 1 : 0);
    // The spans point at count_ and the token vectors, sized once here.
    for (std::size_t i = 0; i < children_.size(); ++i) {
        to_children_.push_back({children_[i], std::as_bytes(std::span(&count_, 1))});
        from_children_.push_back({children_[i], std::as_writable_bytes(std::span(&child_tokens_[i], 1))});
    }
    if (role.parent) {
        to_parent_.push_back({participants[*role.parent], std::as_bytes(std::span(&count_, 1))});
        from_parent_.push_back({participants[*role.parent], std::as_writable_bytes(std::span(parent_token_))});
    }
}

bool Barrier::wait() {
    // Arrival: the whole subtree below, then report up.
    if (!from_children_.empty()) {
        if (!transport_.transfer({}, from_children_)) return false;
        check_tokens(child_tokens_, "arrival");
    }
    if (!to_parent_.empty()) {
        if (!transport_.transfer(to_parent_, {}) || !transport_.transfer({}, from_parent_)) return false;
        check_tokens(parent_token_, "release");
    }
    // Release: everyone has arrived; pass it down.
    if (!to_children_.empty() && !transport_.transfer(to_children_, {})) return false;
    ++count_;
    return true;
}

void Barrier::check_tokens(const std::vector<std::uint8_t>& tokens, const char* what) const {
    for (const std::uint8_t token : tokens)
        if (token != count_)
            throw Transport_error(std::string("barrier ") + what + " token " + std::to_string(token) +
                                  " while at barrier " + std::to_string(count_) + " (mod 256): the units are out of step");
}

}  // namespace eb
