#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace eb {

// The bookkeeping of a source that hands out MFP k from slot k mod depth
// (the generator, the prepared source): which MFP comes next and how many are
// held. `owner` names the source in the errors of a caller that breaks the
// Buffer_reader contract.
class Slot_ring {
public:
    Slot_ring(std::size_t depth, std::uint32_t packing_factor, const char* owner)
        : depth_(depth), packing_factor_(packing_factor), owner_(owner) {}

    // The index of the MFP to hand out now, counted as held.
    std::uint64_t take() {
        if (held_ == depth_) throw std::logic_error(std::string(owner_) + ": every slot is held; release one first");
        ++held_;
        return next_mfp_++;
    }
    bool full() const { return held_ == depth_; }
    void release() {
        if (held_ == 0) throw std::logic_error(std::string(owner_) + ": release without a held MFP");
        --held_;
    }
    // The next MFP starts at event `first_event_id` (a unit joining a running set).
    void skip_to(std::uint64_t first_event_id) {
        if (held_ != 0 || first_event_id % packing_factor_ != 0)
            throw std::logic_error(std::string(owner_) + ": skip_to with MFPs held or inside an MFP");
        next_mfp_ = first_event_id / packing_factor_;
    }
    std::size_t slot_of(std::uint64_t mfp) const { return mfp % depth_; }

private:
    std::size_t depth_;
    std::uint32_t packing_factor_;
    const char* owner_;
    std::uint64_t next_mfp_ = 0;
    std::size_t held_ = 0;
};

}  // namespace eb
