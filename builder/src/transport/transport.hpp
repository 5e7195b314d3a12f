#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "base/rank.hpp"
#include "formats/wire_format.hpp"

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
// of its own, at another place in the event stream; excluded: another unit
// of the set lost it, so the whole set goes on without it; later_epoch: a
// joiner already on a later table than the switch's, which it never takes
// (docs/control-api.md).
enum class Link_failure { closed, reset, timeout, error, join_timeout, out_of_step, excluded, later_epoch };
inline constexpr std::size_t link_failure_kinds = 8;
std::string_view link_failure_name(Link_failure failure);

// The largest control message (cycle messages, barrier tokens, membership
// lists of one byte per rank) a transport of `units` ranks must carry.
inline std::size_t max_control_bytes(Rank units) { return std::max<std::size_t>(256, cycle_message_bytes(units)); }

// Memory registered for a transport's data channel; registered until this
// handle goes. A transport that needs no registration (TCP) hands out one
// that holds nothing.
class Registered_memory {
public:
    virtual ~Registered_memory() = default;
};

// Moves exact-size messages between the units of a run (the role of
// Parallel_comm in the reference design). Implementations: TCP and libibverbs
// RC. Messages between two units arrive in the order sent; a receive takes
// exactly into.size() bytes, the size having been agreed beforehand.
//
// Two channels. The control channel carries small messages (cycle headers,
// barrier tokens, join agreement), each transfer posted and completed as a
// whole. The data channel carries MFPs between registered memory regions,
// zero copy where the transport can: the receives of a cycle are posted
// before its sends (straight at their offsets in the MEP), and completions
// are waited for phase by phase. Each side's program posts both channels'
// operations with a peer in the same order as the peer does.
class Transport {
public:
    virtual ~Transport() = default;

    virtual Rank rank() const = 0;
    virtual Rank units() const = 0;

    // Control channel. Carries out all `sends` and `receives` (each at most
    // max_control_bytes(units()); the transport may copy them), progressing
    // them together, so any pattern in which every send meets a receive
    // posted by its peer completes. Each peer appears at most once per
    // direction; a send to this unit's own rank is matched with the receive
    // from it, which must have the same size. A peer whose connection fails
    // (closed, reset, timed out) is marked lost: its operations are dropped (a
    // receive's buffer may be partly written) and the others complete.
    // Operations with a peer already lost are skipped. Returns false if a
    // stop was requested before completion.
    virtual bool transfer(std::span<const Send> sends, std::span<const Receive> receives) = 0;

    // Data channel: registers `region` so that posted operations may use it.
    virtual std::unique_ptr<Registered_memory> register_memory(std::span<const std::byte> region) = 0;
    // Posts data operations, which complete later (wait_data). Each lies in
    // registered memory; each receive takes the next data message from its
    // peer, exactly into.size() bytes. At most one operation per peer and
    // direction is posted and not yet waited for. A send to this unit's own
    // rank fills the receive from it, posted before or with it. Operations
    // with a peer already lost are skipped.
    virtual void post_data(std::span<const Send> sends, std::span<const Receive> receives) = 0;
    // Waits until the posted data operations with these peers are complete,
    // or their peer lost (then a receive's memory may be partly written).
    // Returns false if a stop was requested first.
    virtual bool wait_data(std::span<const Rank> sent_to, std::span<const Rank> received_from) = 0;
    // Cancels every posted data operation that is not complete: once it
    // returns, nothing posted touches the caller's memory any more, which
    // may then be freed or reused. For a cycle left unfinished (stopped, or
    // a protocol error); the session that used the transport ends with it.
    virtual void quiesce() = 0;

    // Whether `peer` was lost (since it was connected).
    virtual bool lost(Rank peer) const = 0;
    // Marks `peer` lost (once: later calls do nothing), closes its
    // connections and tells the observer; a failed transfer does this, a
    // set that goes on without a peer another unit lost, and a unit that
    // gives up on a joiner.
    virtual void lose(Rank peer, Link_failure failure, const std::string& detail) = 0;
};

}  // namespace eb
