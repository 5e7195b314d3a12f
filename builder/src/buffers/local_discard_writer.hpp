#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <vector>

#include "buffers/buffer.hpp"
#include "buffers/mep_tally.hpp"

namespace eb {

// A BU's output that never holds up the set (reference design, section
// IV-B): when the writer it wraps (a ring whose consumer is behind) has no
// room for a MEP within `patience`, the MEP is assembled into a scratch
// buffer of its own and dropped, counted in the tally; the peers' MFPs still
// land somewhere registered, and the schedule goes on. From then on a MEP
// takes only the room there is at once, until one finds room again.
class Local_discard_writer final : public Buffer_writer {
public:
    Local_discard_writer(Buffer_writer& inner, std::chrono::milliseconds patience, std::uint32_t events_per_mep,
                         Mep_tally& tally);

    std::span<std::byte> allocate(std::size_t bytes) override;
    // Room in the inner writer within `patience`, or none (nothing counted,
    // nothing dropped): for a MEP laid out ahead, which may wait for nothing.
    std::span<std::byte> allocate_within(std::size_t bytes, std::chrono::milliseconds patience) override;
    void commit() override;
    void commit_incomplete() override;
    void discard() override;
    std::size_t max_element() const override { return inner_.max_element(); }
    // The inner writer's regions and the scratch buffer.
    const Memory_regions& regions() const override;

    std::uint64_t discarded() const { return discarded_; }

private:
    void finish_oldest(bool complete);

    Buffer_writer& inner_;
    std::chrono::milliseconds patience_;
    std::uint32_t events_per_mep_;
    Mep_tally& tally_;
    std::deque<bool> in_scratch_;  // per allocated, uncommitted MEP, oldest first
    std::vector<std::byte> scratch_;  // one MEP at a time goes here: the engine holds one
    std::uint64_t discarded_ = 0;
    bool overflowing_ = false;  // the last MEP found no room: do not wait again
    mutable Memory_regions regions_;
    mutable std::uint64_t inner_version_ = 0;  // of the inner regions in regions_
    mutable bool scratch_moved_ = false;
};

}  // namespace eb
