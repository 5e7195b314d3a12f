#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string_view>

#include "rank.hpp"

namespace eb {

// One message of a transfer: the peer and the bytes to send or to fill.
struct Send {
    Rank peer;
    std::span<const std::byte> data;
};
struct Receive {
    Rank peer;
    std::span<std::byte> into;
};

// A peer broke the protocol (or the local system failed). The unit cannot go
// on with this mesh.
class Transport_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Why a peer was given up on. join_timeout: it did not join the running set
// within --join-timeout-ms of a switch; out_of_step: it joined from a session
// of its own, at another place in the event stream (docs/control-api.md).
enum class Link_failure { closed, reset, timeout, error, join_timeout, out_of_step };
inline constexpr std::size_t link_failure_kinds = 6;
std::string_view link_failure_name(Link_failure failure);

// Moves exact-size messages between the units of a run (the role of
// Parallel_comm in the reference design). Implementations: TCP now, verbs RC
// later. Messages between two units arrive in the order sent; a receive takes
// exactly into.size() bytes, the size having been agreed beforehand.
class Transport {
public:
    virtual ~Transport() = default;

    virtual Rank rank() const = 0;
    virtual Rank units() const = 0;

    // Carries out all `sends` and `receives`, progressing them together, so any
    // pattern in which every send meets a receive posted by its peer completes.
    // Each peer appears at most once per direction; a send to this unit's own
    // rank is matched with the receive from it, which must have the same size.
    // A peer whose connection fails (closed, reset, timed out) is marked lost:
    // its operations are dropped (a receive's buffer may be partly written) and
    // the others complete. Operations with a peer already lost are skipped.
    // Returns false if a stop was requested before completion.
    virtual bool transfer(std::span<const Send> sends, std::span<const Receive> receives) = 0;

    // Whether `peer` was lost (since it was connected).
    virtual bool lost(Rank peer) const = 0;
};

}  // namespace eb
