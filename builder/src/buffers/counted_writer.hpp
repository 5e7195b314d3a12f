#pragma once

#include <cstdint>
#include <deque>

#include "buffers/buffer.hpp"
#include "buffers/mep_tally.hpp"

namespace eb {

// Counts the MEPs handed to another writer (a ring for a consumer process) in
// the unit status: their events count as built once committed, since the
// checking happens in the consumer.
class Counted_writer final : public Buffer_writer {
public:
    Counted_writer(Buffer_writer& inner, std::uint32_t events_per_mep, Mep_tally& tally)
        : inner_(inner), events_per_mep_(events_per_mep), tally_(tally) {}

    std::span<std::byte> allocate(std::size_t bytes) override {
        const auto room = inner_.allocate(bytes);
        sizes_.push_back(bytes);
        return room;
    }
    std::span<std::byte> allocate_within(std::size_t bytes, std::chrono::milliseconds patience) override {
        const auto room = inner_.allocate_within(bytes, patience);
        if (room.data() != nullptr) sizes_.push_back(bytes);
        return room;
    }
    void commit() override {
        inner_.commit();
        tally_.add_mep(events_per_mep_, 0, sizes_.front());
        sizes_.pop_front();
    }
    void commit_incomplete() override {
        inner_.commit();
        tally_.add_mep(0, events_per_mep_, sizes_.front());
        sizes_.pop_front();
    }
    void discard() override {
        inner_.discard();
        sizes_.pop_back();
    }
    const Memory_regions& regions() const override { return inner_.regions(); }
    std::size_t max_element() const override { return inner_.max_element(); }

private:
    Buffer_writer& inner_;
    std::uint32_t events_per_mep_;
    Mep_tally& tally_;
    std::deque<std::uint64_t> sizes_;  // of allocated, uncommitted MEPs
};

}  // namespace eb
