#include "formats/mep_checker.hpp"

#include <algorithm>
#include <sstream>
#include <utility>

#include "formats/mep_parser.hpp"
#include "formats/payload.hpp"

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

// The first difference between two maps of as many slots, for a person.
std::string first_difference(const Stream_map& got, const Stream_map& expected) {
    const auto listed = [](const std::vector<std::string>& names) {
        if (names.empty()) return std::string("none");
        std::string text;
        for (const std::string& name : names) text += (text.empty() ? "" : ",") + name;
        return text;
    };
    for (std::size_t slot = 0; slot < expected.held.size(); ++slot)
        if (got.held[slot] != expected.held[slot])
            return "slot " + std::to_string(slot) + " holds streams " + listed(got.held[slot]) + ", expected " +
                   listed(expected.held[slot]);
    return "lacks streams " + listed(got.lacked) + ", expected " + listed(expected.lacked);
}

}  // namespace

Mep_checker::Mep_checker(std::vector<std::uint32_t> sources, std::uint32_t events_per_mep, const Event_model& model,
                         Parse_error_counts& errors, Stream_map streams, Data_threads* threads)
    : model_(model), events_per_mep_(events_per_mep), errors_(errors), threads_(threads) {
    expect_sources(std::move(sources), std::move(streams));
}

void Mep_checker::expect_sources(std::vector<std::uint32_t> sources, Stream_map streams) {
    sources_ = std::move(sources);
    sizes_.clear();
    for (const std::uint32_t source : sources_) sizes_.emplace_back(model_, source);
    if (streams.held.empty()) streams.held.resize(sources_.size());
    streams_ = std::move(streams);
    encoded_streams_ = encode_stream_map(streams_);
    // Each MEP adds to these: map nodes stay put, so no lookup per MEP.
    held_tallies_.assign(streams_.held.size(), {});
    for (std::size_t slot = 0; slot < streams_.held.size(); ++slot)
        for (const std::string& name : streams_.held[slot]) held_tallies_[slot].push_back(&tallies_[name]);
    lacked_tallies_.clear();
    for (const std::string& name : streams_.lacked) lacked_tallies_.push_back(&tallies_[name]);
    lacks_text_ = streams_.lacks_streams() ? "MEP " + describe_stream_map(streams_) + " (unread since a failure)" : "";
}

void Mep_checker::count_all_lacked() {
    for (const auto& slot : held_tallies_)
        for (Stream_tally* tally : slot) tally->lacked += events_per_mep_;
    for (Stream_tally* tally : lacked_tallies_) tally->lacked += events_per_mep_;
}

Parse_status Mep_checker::check_stream_map(std::span<const std::byte> map, std::uint32_t slots) {
    // The same bytes, as a BU writes them: the common case costs a compare.
    if (std::ranges::equal(map, encoded_streams_)) return {};
    if (Parse_status status = parse_stream_map(map, slots, got_streams_); !status.ok()) return status;
    // The encoding is canonical: other bytes, another map.
    return {Parse_error::wrong_streams, "MEP stream map " + first_difference(got_streams_, streams_)};
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
    if (frame.ok() && streams_.held.size() != sources_.size())
        frame = {Parse_error::wrong_streams, "the expected stream map has " + std::to_string(streams_.held.size()) +
                                                 " slots for " + std::to_string(sources_.size()) + " sources"};
    if (frame.ok()) frame = check_stream_map(view.stream_map(), view.header.source_count);
    if (!frame.ok()) {
        errors_.add(frame.error);
        count_all_lacked();  // a rejected MEP's events hold no stream
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

    const auto slots = static_cast<unsigned>(sources_.size());
    const unsigned parts = threads_ == nullptr ? 1 : std::clamp(slots, 1u, threads_->size());
    parts_.resize(std::max<std::size_t>(parts_.size(), parts));
    intact_.assign(slots, 0);
    const auto check_slots = [&](unsigned part) {
        Part& mine = parts_[part];
        mine.event_ok.assign(events_per_mep_, 1);
        mine.problem.clear();
        for (auto slot = static_cast<unsigned>(part_start(slots, part, parts));
             slot < part_start(slots, part + 1, parts); ++slot)
            intact_[slot] = check_mfp(view.slot(slot), slot, view.header.first_event_id, mine);
    };
    if (parts == 1) check_slots(0);
    else threads_->run(parts, check_slots);
    // An event is complete if every part found it so; the first problem in slot order.
    std::vector<std::uint8_t>& event_ok = parts_[0].event_ok;
    for (unsigned part = 0; part < parts; ++part) {
        if (part != 0)
            for (std::uint32_t i = 0; i < events_per_mep_; ++i) event_ok[i] &= parts_[part].event_ok[i];
        if (!parts_[part].problem.empty()) note(verdict.first_problem, parts_[part].problem);
    }
    for (std::uint32_t slot = 0; slot < sources_.size(); ++slot)
        for (Stream_tally* tally : held_tallies_[slot]) {
            tally->held += intact_[slot];
            tally->lacked += events_per_mep_ - intact_[slot];
        }
    for (Stream_tally* tally : lacked_tallies_) tally->lacked += events_per_mep_;
    if (streams_.lacks_streams()) {
        // Built without a stream of the run: no event of it is complete.
        note(verdict.first_problem, lacks_text_);
        std::fill(event_ok.begin(), event_ok.end(), 0);
    }
    verdict.events_complete = static_cast<std::uint64_t>(std::count(event_ok.begin(), event_ok.end(), 1));
    verdict.events_incomplete = events_per_mep_ - verdict.events_complete;
    return verdict;
}

std::uint64_t Mep_checker::check_mfp(std::span<const std::byte> slot, std::size_t index, std::uint64_t first_event_id,
                                     Part& part) {
    const std::uint32_t source = sources_[index];
    Mfp_view mfp;
    const Parse_status status = parse_mfp(mfp_in_slot(slot), {source, first_event_id, events_per_mep_}, mfp);
    if (!status.ok()) {
        errors_.add(status.error);
        note(part.problem, "MEP slot ", index, ": ", status.detail);
        std::fill(part.event_ok.begin(), part.event_ok.end(), 0);
        return 0;
    }
    const Fragment_sizes& size_of = sizes_[index];
    const std::uint8_t type = fragment_type(source);
    std::uint64_t intact = 0;
    for_each_fragment(mfp, [&](std::uint32_t i, std::uint8_t got_type, std::span<const std::byte> payload) {
        const std::uint64_t event_id = first_event_id + i;
        if (got_type == type && payload.size() == size_of(event_id) && payload_matches(payload, source, event_id)) {
            ++intact;
            return;
        }
        note(part.problem, "source ", source, " event ", event_id, ": fragment of type ", int{got_type}, " and ",
             payload.size(), " bytes (expected type ", int{type}, ", ", size_of(event_id),
             " bytes) or its payload differs");
        part.event_ok[i] = 0;
    });
    return intact;
}

}  // namespace eb
