#include "transport/self_delivery.hpp"

#include <cstring>
#include <stdexcept>

namespace eb {

void Self_delivery::check_ranks(std::span<const Send> sends, std::span<const Receive> receives) const {
    for (const Send& send : sends)
        if (send.peer >= units_) throw std::out_of_range(transport_ + ": send to rank " + std::to_string(send.peer));
    for (const Receive& receive : receives)
        if (receive.peer >= units_)
            throw std::out_of_range(transport_ + ": receive from rank " + std::to_string(receive.peer));
}

void Self_delivery::transfer(std::span<const Send> sends, std::span<const Receive> receives) const {
    const Send* to_self = nullptr;
    const Receive* from_self = nullptr;
    for (const Send& send : sends)
        if (send.peer == rank_) to_self = &send;
    for (const Receive& receive : receives)
        if (receive.peer == rank_) from_self = &receive;
    if ((to_self == nullptr) != (from_self == nullptr) ||
        (to_self != nullptr && to_self->data.size() != from_self->into.size()))
        throw std::logic_error(transport_ + ": a send to self needs a receive from self of the same size");
    if (to_self != nullptr && !to_self->data.empty())
        std::memcpy(from_self->into.data(), to_self->data.data(), to_self->data.size());
}

void Self_delivery::post_receive(std::span<std::byte> into) {
    receive_ = into;
    posted_ = true;
}

void Self_delivery::send(std::span<const std::byte> data) {
    const Copy copy = take_send(data);
    if (!data.empty()) std::memcpy(copy.into.data(), copy.from.data(), copy.from.size());
}

Self_delivery::Copy Self_delivery::take_send(std::span<const std::byte> data) {
    if (!posted_ || receive_.size() != data.size())
        throw std::logic_error(transport_ + ": a data send to self needs a posted receive of the same size");
    posted_ = false;
    return {data, receive_};
}

}  // namespace eb
