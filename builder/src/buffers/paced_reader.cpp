#include "buffers/paced_reader.hpp"

#include <thread>

#include "buffers/shm_ring.hpp"

namespace eb {

Paced_reader::Paced_reader(Buffer_reader& inner, std::uint32_t packing_factor, std::uint64_t events_per_second,
                           const Stop_flag& stop)
    : inner_(inner),
      stop_(stop),
      interval_(std::chrono::nanoseconds(std::uint64_t{1'000'000'000} * packing_factor / events_per_second)) {}

std::span<const std::byte> Paced_reader::next() {
    const auto now = std::chrono::steady_clock::now();
    if (due_ == std::chrono::steady_clock::time_point{}) due_ = now;
    if (due_ > now) {
        // Whole milliseconds on the stop flag, the rest (under 1 ms) asleep.
        const auto whole = std::chrono::floor<std::chrono::milliseconds>(due_ - now);
        if ((whole.count() > 0 && stop_.wait_for(whole)) || stop_.requested()) throw Stopped();
        std::this_thread::sleep_until(due_);
    }
    due_ += interval_;
    return inner_.next();
}

std::span<const std::byte> Paced_reader::next_if_ready() {
    const auto now = std::chrono::steady_clock::now();
    if (due_ == std::chrono::steady_clock::time_point{}) due_ = now;
    if (due_ > now) return {};
    const std::span<const std::byte> mfp = inner_.next_if_ready();
    if (!mfp.empty()) due_ += interval_;
    return mfp;
}

}  // namespace eb
