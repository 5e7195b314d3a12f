#include "buffers/source_cursor.hpp"

#include <stdexcept>

namespace eb {

std::span<const std::byte> Source_cursor::next() {
    if (handed_ < held_.size()) return held_[handed_++];
    return hold(inner_.next());
}

std::span<const std::byte> Source_cursor::next_if_ready() {
    if (handed_ < held_.size()) return held_[handed_++];
    return hold(inner_.next_if_ready());
}

std::span<const std::byte> Source_cursor::hold(std::span<const std::byte> mfp) {
    if (mfp.empty()) return mfp;  // the source ended, or has none yet: no chunk taken
    held_.push_back(mfp);
    ++handed_;
    return mfp;
}

void Source_cursor::release() {
    if (handed_ == 0) throw std::logic_error("Source_cursor: release without an MFP handed out");
    inner_.release();
    held_.pop_front();
    --handed_;
    ++first_held_;
}

void Source_cursor::start_at(std::uint64_t chunk) {
    handed_ = 0;
    const bool held_from_chunk = chunk >= first_held_ && chunk < first_held_ + held_.size();
    // Held MFPs before `chunk`, or all of them if `chunk` is not among them, are done with.
    while (!held_.empty() && (!held_from_chunk || first_held_ < chunk)) {
        inner_.release();
        held_.pop_front();
        ++first_held_;
    }
    if (first_held_ != chunk) {
        inner_.skip_to(chunk * packing_factor_);
        first_held_ = chunk;
    }
}

}  // namespace eb
