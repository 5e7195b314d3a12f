#pragma once

#include <cstdint>
#include <vector>

namespace eb {

// How big generated fragments are (reference design, section V-A).
enum class Size_model : std::uint8_t {
    fixed,    // every fragment is `fragment_size` bytes
    poisson,  // Poisson sizes; the three detector groups carry 0.28/0.33/0.39 of the event
};

struct Event_model {
    Size_model kind = Size_model::fixed;
    std::uint32_t fragment_size = 128;  // fixed size, or the mean over all sources (133 B in the paper)
};

inline constexpr std::uint32_t detector_groups = 3;  // rich, calo/velo/muon, SciFi/UT
inline constexpr double group_event_fraction[detector_groups] = {0.28, 0.33, 0.39};

// Sources are dealt to the groups in turn, so each group holds a third of them.
constexpr std::uint32_t detector_group(std::uint32_t source_id) { return source_id % detector_groups; }

// The fragment type a source writes: its group, counted from 1 (0 is "missing").
constexpr std::uint8_t fragment_type(std::uint32_t source_id) {
    return static_cast<std::uint8_t>(1 + detector_group(source_id));
}

// Mean fragment size of a source: its group's share of the event spread over
// a third of the sources, so the mean over all sources is model.fragment_size.
double mean_fragment_size(const Event_model& model, std::uint32_t source_id);

// Largest mean the Poisson model accepts, so sizes stay within a u16.
inline constexpr std::uint32_t max_poisson_fragment_size = 16384;

// The size of each fragment of one source: a pure function of the event id,
// so the generator and the consumer that checks it agree without talking.
class Fragment_sizes {
public:
    Fragment_sizes(const Event_model& model, std::uint32_t source_id);

    // Inline: the generator and the checker ask once per fragment.
    std::uint16_t operator()(std::uint64_t event_id) const { return cdf_.empty() ? fixed_ : drawn(event_id); }

private:
    std::uint16_t drawn(std::uint64_t event_id) const;

    std::uint32_t source_id_;
    std::uint16_t fixed_;
    // Poisson: cdf_[k] = P(size <= k) scaled to 2^32; empty for fixed sizes.
    std::vector<std::uint64_t> cdf_;
};

}  // namespace eb
