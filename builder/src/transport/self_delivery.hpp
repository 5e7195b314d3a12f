#pragma once

#include <span>
#include <string>

#include "transport/transport.hpp"

namespace eb {

// What the transports share about the operations they are handed: every peer
// in range, and what a unit sends itself, which takes no wire but one copy.
class Self_delivery {
public:
    // `transport` names the implementation in the errors of a caller that
    // breaks the Transport contract.
    Self_delivery(Rank rank, Rank units, std::string transport)
        : rank_(rank), units_(units), transport_(std::move(transport)) {}

    // Throws std::out_of_range naming the first operation with a rank past units.
    void check_ranks(std::span<const Send> sends, std::span<const Receive> receives) const;
    // Control: the transfer's send to this unit fills its receive from it;
    // one without the other, or of another size, is a logic error.
    void transfer(std::span<const Send> sends, std::span<const Receive> receives) const;
    // Data: a posted receive from this unit, filled by the send to it posted
    // with or after it.
    void post_receive(std::span<std::byte> into);
    void send(std::span<const std::byte> data);
    // The same checks as send(), for a transport that makes the copy later
    // (on its data threads, while the wire moves): what to copy where.
    struct Copy {
        std::span<const std::byte> from;
        std::span<std::byte> into;
    };
    Copy take_send(std::span<const std::byte> data);
    // The posted receive is dropped (quiesce).
    void cancel() { posted_ = false; }

private:
    Rank rank_;
    Rank units_;
    std::string transport_;
    std::span<std::byte> receive_;
    bool posted_ = false;
};

}  // namespace eb
