#pragma once

#include <chrono>
#include <cstdint>

#include "buffers/buffer.hpp"
#include "base/stop_flag.hpp"

namespace eb {

// Hands out another reader's MFPs no faster than `events_per_second`, as a
// readout card at a given trigger rate would: MFP k is due k * F / rate after
// the first. Waiting is the point here, so it waits until the due time, on
// the stop flag: a stop ends the wait at once with Stopped.
class Paced_reader final : public Buffer_reader {
public:
    Paced_reader(Buffer_reader& inner, std::uint32_t packing_factor, std::uint64_t events_per_second,
                 const Stop_flag& stop);

    std::span<const std::byte> next() override;
    // Empty until the next MFP is due.
    std::span<const std::byte> next_if_ready() override;
    void release() override { inner_.release(); }
    const Memory_regions& regions() const override { return inner_.regions(); }
    void skip_to(std::uint64_t first_event_id) override {
        inner_.skip_to(first_event_id);
        due_ = {};  // pace from now, not from the events skipped
    }

private:
    Buffer_reader& inner_;
    const Stop_flag& stop_;
    std::chrono::nanoseconds interval_;
    std::chrono::steady_clock::time_point due_{};
};

}  // namespace eb
