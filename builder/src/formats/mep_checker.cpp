#include "mep_checker.hpp"

#include <algorithm>
#include <sstream>
#include <utility>

#include "mep_parser.hpp"
#include "payload.hpp"

namespace eb {
namespace {

// Keeps the first problem only: building the text is not free, one is enough.
template <class... Parts>
void note(std::string& problem, const Parts&... parts) {
    if (!problem.empty()) return;
    std::ostringstream text;
    (text << ... << parts);
    problem = text.str();
}

}  // namespace

Mep_checker::Mep_checker(std::vector<std::uint32_t> sources, std::uint32_t events_per_mep, const Event_model& model,
                         Parse_error_counts& errors)
    : model_(model), events_per_mep_(events_per_mep), errors_(errors) {
    expect_sources(std::move(sources));
}

void Mep_checker::expect_sources(std::vector<std::uint32_t> sources) {
    sources_ = std::move(sources);
    sizes_.clear();
    for (const std::uint32_t source : sources_) sizes_.emplace_back(model_, source);
}

Mep_verdict Mep_checker::check(std::span<const std::byte> mep) {
    Mep_verdict verdict;
    Mep_view view;
    Parse_status frame = parse_mep_frame(mep, view);
    if (frame.ok() && view.header.event_count != events_per_mep_)
        frame = {Parse_error::wrong_fragment_count, "MEP holds " + std::to_string(view.header.event_count) +
                                                        " events, expected " + std::to_string(events_per_mep_)};
    if (frame.ok() && view.header.source_count != sources_.size())
        frame = {Parse_error::wrong_source_count, "MEP holds " + std::to_string(view.header.source_count) +
                                                      " sources, expected one of each of the " +
                                                      std::to_string(sources_.size()) + " live sources"};
    if (!frame.ok()) {
        errors_.add(frame.error);
        return {0, events_per_mep_, std::move(frame.detail)};
    }
    if (stride_ != 0) {
        const std::uint64_t first = view.header.first_event_id;
        const bool dropped_before = dropped_meps_accepted_ && first > next_first_event_ &&
                                    (first - next_first_event_) % stride_ == 0;
        if (dropped_before) {
            skipped_meps_ += (first - next_first_event_) / stride_;
        } else if (first != next_first_event_) {
            errors_.add(Parse_error::wrong_event_range);
            note(verdict.first_problem, "MEP starts at event ", first, ", expected ", next_first_event_,
                 ": MEPs missing or out of order");
        }
        next_first_event_ = first + stride_;
    }

    event_ok_.assign(events_per_mep_, 1);
    for (std::uint32_t slot = 0; slot < sources_.size(); ++slot)
        check_mfp(view.slot(slot), slot, view.header.first_event_id, verdict.first_problem);
    verdict.events_complete = static_cast<std::uint64_t>(std::count(event_ok_.begin(), event_ok_.end(), 1));
    verdict.events_incomplete = events_per_mep_ - verdict.events_complete;
    return verdict;
}

void Mep_checker::check_mfp(std::span<const std::byte> slot, std::size_t index, std::uint64_t first_event_id,
                            std::string& problem) {
    const std::uint32_t source = sources_[index];
    Mfp_view mfp;
    const Parse_status status = parse_mfp(mfp_in_slot(slot), {source, first_event_id, events_per_mep_}, mfp);
    if (!status.ok()) {
        errors_.add(status.error);
        note(problem, "MEP slot ", index, ": ", status.detail);
        std::fill(event_ok_.begin(), event_ok_.end(), 0);
        return;
    }
    const Fragment_sizes& size_of = sizes_[index];
    const std::uint8_t type = fragment_type(source);
    for_each_fragment(mfp, [&](std::uint32_t i, std::uint8_t got_type, std::span<const std::byte> payload) {
        const std::uint64_t event_id = first_event_id + i;
        if (got_type == type && payload.size() == size_of(event_id) && payload_matches(payload, source, event_id))
            return;
        note(problem, "source ", source, " event ", event_id, ": fragment of type ", int{got_type}, " and ",
             payload.size(), " bytes (expected type ", int{type}, ", ", size_of(event_id),
             " bytes) or its payload differs");
        event_ok_[i] = 0;
    });
}

}  // namespace eb
