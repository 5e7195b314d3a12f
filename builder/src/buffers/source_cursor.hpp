#pragma once

#include <cstdint>
#include <deque>
#include <span>

#include "buffers/buffer.hpp"

namespace eb {

// The RU's source as the unit hands it to each session: it knows which chunk
// every MFP it took from the source belongs to, and which it still holds. A
// session that ends inside a cycle (reset, a lost set, an error) has taken
// that cycle's MFPs and released none; start_at() puts the source exactly at
// the set's next chunk for the next session: the MFPs still held are handed
// out again where they are that chunk's (any source can do that), released
// where they are not, and the source skips (skip_to) only when it must.
class Source_cursor final : public Buffer_reader {
public:
    Source_cursor(Buffer_reader& inner, std::uint32_t packing_factor) : inner_(inner), packing_factor_(packing_factor) {}

    std::span<const std::byte> next() override;
    std::span<const std::byte> next_if_ready() override;
    void release() override;
    const Memory_regions& regions() const override { return inner_.regions(); }

    // The next next() hands out the MFP of chunk `chunk`; nothing handed out
    // is held any more. Throws what the source's skip_to throws.
    void start_at(std::uint64_t chunk);

private:
    std::span<const std::byte> hold(std::span<const std::byte> mfp);  // a new MFP from inner_, held

    Buffer_reader& inner_;
    std::uint32_t packing_factor_;
    std::deque<std::span<const std::byte>> held_;  // taken from inner_ and not released, oldest first
    std::uint64_t first_held_ = 0;  // chunk of held_.front(), or of inner_'s next MFP when none is held
    std::size_t handed_ = 0;        // of held_, those handed out since start_at; the rest are handed again first
};

}  // namespace eb
