#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "buffer.hpp"

namespace eb {

// Stands in for a readout card: MFP k of this source holds events
// [k * packing_factor, (k + 1) * packing_factor) with generator payloads.
// MFPs are written into a ring of `depth` reusable slots, so up to `depth` may
// be held at once and nothing is allocated after construction.
class Generator_reader final : public Buffer_reader {
public:
    Generator_reader(std::uint32_t source_id, std::uint32_t packing_factor,
                     std::uint32_t fragment_size, std::size_t depth);

    std::span<const std::byte> next() override;
    void release() override;

private:
    std::uint32_t source_id_;
    std::uint32_t packing_factor_;
    std::uint32_t fragment_size_;
    std::vector<std::vector<std::byte>> slots_;
    std::uint64_t next_mfp_ = 0;
    std::size_t held_ = 0;
};

}  // namespace eb
