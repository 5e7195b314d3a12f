#include "mep_checker.hpp"

#include <algorithm>
#include <sstream>
#include <utility>

#include "mep_layout.hpp"
#include "payload.hpp"
#include "wire_format.hpp"

namespace eb {
namespace {

template <class... Parts>
std::string describe(const Parts&... parts) {
    std::ostringstream text;
    (text << ... << parts);
    return text.str();
}

// Keeps the first problem only: building the text is not free, one is enough.
template <class... Parts>
void note(std::string& problem, const Parts&... parts) {
    if (problem.empty()) problem = describe(parts...);
}

}  // namespace

Mep_checker::Mep_checker(std::vector<std::uint32_t> sources, std::uint32_t events_per_mep)
    : sources_(std::move(sources)), events_per_mep_(events_per_mep) {}

void Mep_checker::fail_events(std::size_t from, std::size_t to) {
    std::fill(event_ok_.begin() + static_cast<std::ptrdiff_t>(from),
              event_ok_.begin() + static_cast<std::ptrdiff_t>(to), 0);
}

Mep_verdict Mep_checker::check(std::span<const std::byte> mep) {
    Mep_verdict verdict;
    const auto all_incomplete = [&](std::string problem) {
        return Mep_verdict{0, events_per_mep_, std::move(problem)};
    };

    if (mep.size() < sizeof(Mep_header))
        return all_incomplete(describe("MEP of ", mep.size(), " bytes is shorter than its header"));
    const auto header = load<Mep_header>(mep, 0);
    if (header.magic != mep_magic || header.version != wire_version)
        return all_incomplete(describe("MEP header has magic 0x", std::hex, header.magic, std::dec,
                                       " version ", header.version));
    if (header.event_count != events_per_mep_)
        return all_incomplete(describe("MEP holds ", header.event_count, " events, expected ",
                                       events_per_mep_));
    if (header.source_count != sources_.size())
        return all_incomplete(describe("MEP holds ", header.source_count, " sources, expected ",
                                       sources_.size()));
    if (header.total_bytes != mep.size() || mep.size() < mep_header_bytes(sources_.size()))
        return all_incomplete(describe("MEP header says ", header.total_bytes, " bytes, buffer has ",
                                       mep.size()));

    event_ok_.assign(events_per_mep_, 1);
    // MFPs must follow the offsets table in order without overlapping.
    std::uint64_t free_from = mep_header_bytes(sources_.size());
    for (std::size_t slot = 0; slot < sources_.size(); ++slot) {
        const auto offset = load<std::uint64_t>(mep, sizeof(Mep_header) + slot * sizeof(std::uint64_t));
        if (offset < free_from || offset >= mep.size() || offset % wire_alignment != 0) {
            note(verdict.first_problem, "MEP slot ", slot, " has offset ", offset, " outside ",
                 free_from, "..", mep.size());
            fail_events(0, events_per_mep_);
            continue;
        }
        free_from = offset + align_up(check_mfp(mep.subspan(offset), sources_[slot],
                                                header.first_event_id, verdict.first_problem));
    }

    verdict.events_complete = static_cast<std::uint64_t>(std::count(event_ok_.begin(), event_ok_.end(), 1));
    verdict.events_incomplete = events_per_mep_ - verdict.events_complete;
    return verdict;
}

std::uint64_t Mep_checker::check_mfp(std::span<const std::byte> slot, std::uint32_t source_id,
                                     std::uint64_t first_event_id, std::string& problem) {
    const std::size_t events = events_per_mep_;
    if (slot.size() < sizeof(Mfp_header)) {
        note(problem, "MFP of source ", source_id, " is cut off by the MEP end");
        fail_events(0, events);
        return slot.size();
    }
    const auto header = load<Mfp_header>(slot, 0);
    if (header.magic != mfp_magic || header.version != wire_version || header.source_id != source_id ||
        header.first_event_id != first_event_id || header.fragment_count != events ||
        header.total_bytes < sizeof(Mfp_header) || header.total_bytes > slot.size()) {
        note(problem, "MFP header in the slot of source ", source_id, " is wrong: magic 0x", std::hex,
             header.magic, std::dec, " version ", header.version, " source ", header.source_id,
             " first event ", header.first_event_id, " (expected ", first_event_id, ") fragments ",
             header.fragment_count, " bytes ", header.total_bytes);
        fail_events(0, events);
        return std::min<std::uint64_t>(std::max<std::uint64_t>(header.total_bytes, sizeof(Mfp_header)),
                                       slot.size());
    }

    const auto mfp = slot.first(header.total_bytes);
    std::uint64_t at = sizeof(Mfp_header);
    for (std::size_t i = 0; i < events; ++i) {
        const std::uint64_t event_id = first_event_id + i;
        if (at + sizeof(Fragment_header) > mfp.size()) {
            note(problem, "source ", source_id, " event ", event_id, ": fragment header beyond the MFP end");
            fail_events(i, events);  // the walk cannot go on: the rest are unaccounted for
            return mfp.size();
        }
        const auto fragment = load<Fragment_header>(mfp, at);
        const std::uint64_t stride = align_up(sizeof(Fragment_header) + std::uint64_t{fragment.size});
        if (at + stride > mfp.size()) {
            note(problem, "source ", source_id, " event ", event_id, ": fragment of ", fragment.size,
                 " bytes runs past the MFP end");
            fail_events(i, events);
            return mfp.size();
        }
        const bool intact =
            fragment.event_id == event_id && fragment.source_id == source_id &&
            payload_matches(mfp.subspan(at + sizeof(Fragment_header), fragment.size), source_id, event_id);
        if (!intact) {
            note(problem, "source ", source_id, " event ", event_id, ": fragment says event ",
                 fragment.event_id, " source ", fragment.source_id, ", or its payload differs");
            event_ok_[i] = 0;
        }
        at += stride;
    }
    if (at != mfp.size()) {
        // Header and fragments disagree about the MFP's extent: trust none of it.
        note(problem, "MFP of source ", source_id, " has ", mfp.size() - at, " bytes after its last fragment");
        fail_events(0, events);
    }
    return mfp.size();
}

}  // namespace eb
