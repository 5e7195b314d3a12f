#include "formats/event_model.hpp"

#include <algorithm>
#include <cmath>

#include "formats/wire_format.hpp"

namespace eb {
namespace {

// splitmix64: a well-mixed 64-bit value per (source, event).
std::uint64_t mix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

}  // namespace

double mean_fragment_size(const Event_model& model, std::uint32_t source_id) {
    if (model.kind == Size_model::fixed) return model.fragment_size;
    return model.fragment_size * detector_groups * group_event_fraction[detector_group(source_id)];
}

Fragment_sizes::Fragment_sizes(const Event_model& model, std::uint32_t source_id)
    : source_id_(source_id),
      fixed_(static_cast<std::uint16_t>(std::min<std::uint32_t>(model.fragment_size, max_fragment_bytes))) {
    if (model.kind != Size_model::poisson) return;
    // Inverse-transform table out to where the tail is below 2^-32. The pmf is
    // taken in log space so large means do not underflow exp(-mean).
    const double mean = mean_fragment_size(model, source_id);
    const auto last = static_cast<std::uint32_t>(
        std::min<double>(max_fragment_bytes, mean + 12 * std::sqrt(mean) + 16));
    double cumulative = 0;
    double log_factorial = 0;  // log k!, summed here: lgamma() writes a global (signgam), racing other threads
    for (std::uint32_t k = 0; k <= last; ++k) {
        if (k > 0) log_factorial += std::log(static_cast<double>(k));
        cumulative += std::exp(k * std::log(mean) - mean - log_factorial);
        cdf_.push_back(static_cast<std::uint64_t>(std::min(cumulative, 1.0) * 4294967296.0));
    }
    cdf_.back() = std::uint64_t{1} << 32;  // every draw lands in the table
}

std::uint16_t Fragment_sizes::drawn(std::uint64_t event_id) const {
    const std::uint64_t draw = mix(event_id ^ (std::uint64_t{source_id_} << 40)) >> 32;
    // The first k with P(size <= k) > draw.
    const auto k = std::upper_bound(cdf_.begin(), cdf_.end(), draw) - cdf_.begin();
    return static_cast<std::uint16_t>(std::min<std::ptrdiff_t>(k, static_cast<std::ptrdiff_t>(cdf_.size()) - 1));
}

}  // namespace eb
