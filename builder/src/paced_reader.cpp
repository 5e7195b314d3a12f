#include "paced_reader.hpp"

#include <thread>

namespace eb {

Paced_reader::Paced_reader(Buffer_reader& inner, std::uint32_t packing_factor, std::uint64_t events_per_second)
    : inner_(inner),
      interval_(std::chrono::nanoseconds(std::uint64_t{1'000'000'000} * packing_factor / events_per_second)) {}

std::span<const std::byte> Paced_reader::next() {
    const auto now = std::chrono::steady_clock::now();
    if (due_ == std::chrono::steady_clock::time_point{}) due_ = now;
    if (due_ > now) std::this_thread::sleep_until(due_);
    due_ += interval_;
    return inner_.next();
}

}  // namespace eb
