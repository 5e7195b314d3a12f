#include "buffers/local_discard_writer.hpp"

#include <algorithm>
#include <stdexcept>

#include "base/log.hpp"

namespace eb {
namespace {
// Beyond this many discarded MEPs only the counters keep track.
constexpr std::uint64_t discards_logged = 10;
}  // namespace

Local_discard_writer::Local_discard_writer(Buffer_writer& inner, std::chrono::milliseconds patience,
                                           std::uint32_t events_per_mep, Mep_tally& tally)
    : inner_(inner), patience_(patience), events_per_mep_(events_per_mep), tally_(tally) {}

std::span<std::byte> Local_discard_writer::allocate(std::size_t bytes) {
    // Once a MEP found no room in time, the next ones take only room there
    // is at once, so the set is not slowed by the patience every cycle.
    if (const auto room = allocate_within(bytes, overflowing_ ? std::chrono::milliseconds(0) : patience_);
        room.data() != nullptr)
        return room;
    overflowing_ = true;
    if (std::find(in_scratch_.begin(), in_scratch_.end(), true) != in_scratch_.end())
        throw std::logic_error("Local_discard_writer: one MEP at a time in the scratch buffer");
    const std::byte* before = scratch_.data();
    scratch_.resize(bytes);
    scratch_moved_ = scratch_moved_ || scratch_.data() != before;
    in_scratch_.push_back(true);
    return scratch_;
}

std::span<std::byte> Local_discard_writer::allocate_within(std::size_t bytes, std::chrono::milliseconds patience) {
    const auto room = inner_.allocate_within(bytes, patience);
    if (room.data() == nullptr) return {};
    overflowing_ = false;
    in_scratch_.push_back(false);
    return room;
}

void Local_discard_writer::finish_oldest(bool complete) {
    if (in_scratch_.empty()) throw std::logic_error("Local_discard_writer: commit without allocate");
    const bool scratch = in_scratch_.front();
    in_scratch_.pop_front();
    if (!scratch) {
        complete ? inner_.commit() : inner_.commit_incomplete();
        return;
    }
    tally_.add_discarded_mep(events_per_mep_);
    if (++discarded_ <= discards_logged)
        log_warning("a MEP was dropped here: the output had no room for it within ", patience_.count(),
                    " ms (its consumer is behind); the set goes on",
                    discarded_ == discards_logged ? " (further ones are only counted)" : "");
}

void Local_discard_writer::commit() { finish_oldest(true); }

void Local_discard_writer::commit_incomplete() { finish_oldest(false); }

void Local_discard_writer::discard() {
    if (in_scratch_.empty()) throw std::logic_error("Local_discard_writer: discard without allocate");
    if (!in_scratch_.back()) inner_.discard();
    in_scratch_.pop_back();
}

const Memory_regions& Local_discard_writer::regions() const {
    const Memory_regions& inner = inner_.regions();
    if (inner.version() != inner_version_ || scratch_moved_) {
        std::vector<std::span<const std::byte>> spans = inner.spans();
        if (!scratch_.empty()) spans.emplace_back(scratch_.data(), scratch_.capacity());
        regions_.assign(std::move(spans));
        inner_version_ = inner.version();
        scratch_moved_ = false;
    }
    return regions_;
}

}  // namespace eb
