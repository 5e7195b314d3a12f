#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "buffers/buffer.hpp"
#include "formats/event_model.hpp"
#include "buffers/slot_ring.hpp"

namespace eb {

// A source whose MFPs cost nothing to make, as a readout card's DMA costs the
// RU nothing: --source prepared, to measure the data mover alone. It makes
// `depth` MFPs with the generator once, then hands them out again in turn,
// each with its header stamped for the events it stands for. Headers and
// layouts are right (the RU's checks pass); payloads are the first MFPs', so
// only an output that does not check them may take its MEPs.
class Prepared_reader final : public Buffer_reader {
public:
    Prepared_reader(std::uint32_t source_id, std::uint32_t packing_factor, const Event_model& model,
                    std::size_t depth);

    std::span<const std::byte> next() override;
    // Empty while every slot is held.
    std::span<const std::byte> next_if_ready() override { return ring_.full() ? std::span<const std::byte>{} : next(); }
    void release() override { ring_.release(); }
    void skip_to(std::uint64_t first_event_id) override { ring_.skip_to(first_event_id); }
    const Memory_regions& regions() const override { return regions_; }

private:
    std::uint32_t packing_factor_;
    std::vector<std::vector<std::byte>> slots_;  // made once, never moved
    Slot_ring ring_;
    Memory_regions regions_;
};

}  // namespace eb
