#include "buffers/checking_writer.hpp"

#include <stdexcept>
#include <utility>

#include "base/log.hpp"

namespace eb {
namespace {
// Beyond this many damaged MEPs only the counters and last_error keep track,
// so systematic damage cannot flood the log.
constexpr std::uint64_t damaged_meps_logged = 10;
}  // namespace

Checking_writer::Checking_writer(Mep_checker checker, Mep_tally& tally)
    : checker_(std::move(checker)), tally_(tally) {}

std::span<std::byte> Checking_writer::allocate(std::size_t bytes) {
    if (allocated_) throw std::logic_error("Checking_writer: one MEP at a time");
    const std::byte* before = mep_.data();
    mep_.resize(bytes);
    if (mep_.data() != before) regions_.assign({std::span<const std::byte>(mep_.data(), mep_.capacity())});
    allocated_ = true;
    return mep_;
}

void Checking_writer::discard() {
    if (!allocated_) throw std::logic_error("Checking_writer: discard without allocate");
    allocated_ = false;
    checker_.skip_mep();  // dropped by the BU, counted there: not a gap
}

void Checking_writer::commit() {
    if (!allocated_) throw std::logic_error("Checking_writer: commit without allocate");
    allocated_ = false;
    Mep_verdict verdict = checker_.check(mep_);
    tally_.add_mep(verdict.events_complete, verdict.events_incomplete, mep_.size());
    if (verdict.events_incomplete == 0) return;
    if (++damaged_meps_ <= damaged_meps_logged)
        log_warning("MEP with ", verdict.events_incomplete, " incomplete events: ", verdict.first_problem,
                    damaged_meps_ == damaged_meps_logged ? " (further damaged MEPs are only counted)" : "");
    tally_.note_problem(std::move(verdict.first_problem));
}

}  // namespace eb
