#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "buffers/buffer.hpp"
#include "base/data_threads.hpp"
#include "formats/event_model.hpp"
#include "buffers/slot_ring.hpp"

namespace eb {

// Stands in for a readout card: MFP k of this source holds events
// [k * packing_factor, (k + 1) * packing_factor) with generator payloads and
// sizes from the event model. MFPs are written into a ring of `depth` reusable
// slots, so up to `depth` may be held at once; after the first round nothing
// is allocated (a slot only grows to the largest MFP seen).
class Generator_reader final : public Buffer_reader {
public:
    // With `threads`, each MFP's payloads are written on them (write_mfp).
    Generator_reader(std::uint32_t source_id, std::uint32_t packing_factor, const Event_model& model,
                     std::size_t depth, Data_threads* threads = nullptr);

    std::span<const std::byte> next() override;
    // Empty while every slot is held.
    std::span<const std::byte> next_if_ready() override { return ring_.full() ? std::span<const std::byte>{} : next(); }
    void release() override;
    void skip_to(std::uint64_t first_event_id) override;
    const Memory_regions& regions() const override { return regions_; }

private:
    std::uint32_t source_id_;
    std::uint32_t packing_factor_;
    Fragment_sizes fragment_sizes_;
    std::vector<std::uint16_t> sizes_;  // of the MFP being generated; reused
    std::vector<std::vector<std::byte>> slots_;
    Slot_ring ring_;
    Memory_regions regions_;  // the slots, whole capacity; changes when one grows
    Data_threads* threads_;
};

}  // namespace eb
