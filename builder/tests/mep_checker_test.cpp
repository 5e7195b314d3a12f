#include "formats/mep_checker.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <numeric>
#include <vector>

#include "formats/mep_layout.hpp"
#include "formats/mfp.hpp"
#include "formats/wire_format.hpp"

namespace eb {
namespace {

constexpr std::uint32_t sources = 3;
constexpr std::uint32_t events = 10;
constexpr std::uint32_t payload_bytes = 24;
constexpr std::uint64_t first_event = 20;

const Event_model model{Size_model::fixed, payload_bytes};
// Streams on slots 0 and 2; slot 1's RU reads none (a generator, say).
const Stream_map streams{{{"velo-0"}, {}, {"ut-2a", "ut-2b"}}, {}};

// An intact MEP as a BU would assemble it from generator MFPs.
std::vector<std::byte> intact_mep(std::uint64_t first = first_event, const Stream_map& map = streams) {
    const std::vector<std::uint16_t> fragment_sizes(events, payload_bytes);
    const std::vector<std::uint64_t> sizes(sources, mfp_bytes(fragment_sizes));
    const std::vector<std::byte> encoded = encode_stream_map(map);
    const Mep_layout layout = mep_layout(sizes, encoded.size());
    std::vector<std::byte> mep(layout.total_bytes);
    write_mep_header(mep, layout, first, events, 1, encoded);
    for (std::uint32_t s = 0; s < sources; ++s)
        write_mfp(std::span(mep).subspan(layout.offsets[s], sizes[s]),
                  {.source_id = s, .first_event_id = first, .type = fragment_type(s)}, fragment_sizes);
    return mep;
}

std::size_t offsets_entry(std::uint32_t source) { return sizeof(Mep_header) + 8 * source; }
const std::size_t stream_map_at = offsets_entry(sources);
std::size_t mfp_at(const std::vector<std::byte>& mep, std::uint32_t source) {
    return load<std::uint64_t>(mep, offsets_entry(source));
}
std::size_t type_at(const std::vector<std::byte>& mep, std::uint32_t source, std::uint32_t event) {
    return mfp_at(mep, source) + sizeof(Mfp_header) + event;
}
std::size_t size_at(const std::vector<std::byte>& mep, std::uint32_t source, std::uint32_t event) {
    return mfp_at(mep, source) + sizeof(Mfp_header) + events + 2 * event;
}
std::size_t payload_at(const std::vector<std::byte>& mep, std::uint32_t source, std::uint32_t event) {
    return mfp_at(mep, source) + mfp_payload_start(events) + event * align_up(payload_bytes);
}

template <class Header, class Field>
void poke(std::vector<std::byte>& bytes, std::size_t at, Field Header::*field, Field value) {
    auto header = load<Header>(bytes, at);
    header.*field = value;
    store(bytes, at, header);
}

Mep_checker checker(Parse_error_counts& errors, const Stream_map& map = streams, Data_threads* threads = nullptr) {
    std::vector<std::uint32_t> ids(sources);
    std::iota(ids.begin(), ids.end(), 0u);
    return Mep_checker(ids, events, model, errors, map, threads);
}

struct Damage_case {
    const char* name;
    std::function<void(std::vector<std::byte>&)> damage;
    std::uint64_t complete;
    const char* problem;  // expected in first_problem; "" for none
};

TEST(MepChecker, CountsEachEventAsCompleteOrIncomplete) {
    const Damage_case cases[] = {
        {"intact", [](auto&) {}, 10, ""},
        {"payload byte flipped", [](auto& m) { m[payload_at(m, 1, 4) + 5] ^= std::byte{1}; }, 9, "source 1 event 24"},
        {"last payload byte of the MEP flipped", [](auto& m) { m[payload_at(m, 2, 9) + 23] ^= std::byte{1}; }, 9,
         "source 2 event 29"},
        {"fragment of another type", [](auto& m) { m[type_at(m, 2, 7)] = std::byte{9}; }, 9,
         "source 2 event 27: fragment of type 9"},
        {"fragment size shrunk: the MFP's extent no longer adds up",
         [](auto& m) { store(m, size_at(m, 0, 3), std::uint16_t{8}); }, 0, "trailing_bytes"},
        {"fragment size runs past the MFP", [](auto& m) { store(m, size_at(m, 0, 3), std::uint16_t{0xFFFF}); }, 0,
         "fragment_overflow: fragment 3 of 65535 bytes"},
        {"MFP magic", [](auto& m) { poke(m, mfp_at(m, 2), &Mfp_header::magic, std::uint16_t{0xBAD}); }, 0,
         "MEP slot 2: MFP bad_magic"},
        {"MFP version", [](auto& m) { poke(m, mfp_at(m, 2), &Mfp_header::version, std::uint16_t{1}); }, 0,
         "bad_version: version 1"},
        {"MFP alignment", [](auto& m) { poke(m, mfp_at(m, 2), &Mfp_header::align_log2, std::uint8_t{13}); }, 0,
         "bad_alignment: align_log2 13"},
        {"MFP of another event range",
         [](auto& m) { poke(m, mfp_at(m, 1), &Mfp_header::first_event_id, std::uint64_t{30}); }, 0,
         "wrong_event_range: source 1 events from 30, expected from 20"},
        {"MFP of another source in the slot",
         [](auto& m) { poke(m, mfp_at(m, 1), &Mfp_header::source_id, std::uint32_t{2}); }, 0,
         "wrong_source: source 2, expected 1"},
        {"MFP with another fragment count",
         [](auto& m) { poke(m, mfp_at(m, 1), &Mfp_header::fragment_count, std::uint32_t{1} << 31); }, 0,
         "MEP slot 1: MFP truncated"},
        {"MFP size differs from its slot",
         [](auto& m) { poke(m, mfp_at(m, 1), &Mfp_header::total_bytes, std::uint64_t{64}); }, 0,
         "size_mismatch: header says 64 bytes"},
        {"MEP magic", [](auto& m) { poke(m, 0, &Mep_header::magic, std::uint16_t{0xBAD}); }, 0, "MEP bad_magic"},
        {"MEP missing a source", [](auto& m) { poke(m, 0, &Mep_header::source_count, std::uint32_t{2}); }, 0,
         "holds 2 sources, expected one of each of the 3"},
        {"MEP of another packing factor", [](auto& m) { poke(m, 0, &Mep_header::event_count, std::uint32_t{11}); }, 0,
         "holds 11 events"},
        {"MEP cut short", [](auto& m) { m.resize(m.size() - 8); }, 0, "MEP size_mismatch"},
        {"MEP empty", [](auto& m) { m.clear(); }, 0, "MEP truncated"},
        {"offset overlapping the previous MFP",
         [](auto& m) { store(m, offsets_entry(2), load<std::uint64_t>(m, offsets_entry(1))); }, 0,
         "bad_offset: slot 2"},
        {"offset beyond the MEP", [](auto& m) { store(m, offsets_entry(1), std::uint64_t{1} << 40); }, 0,
         "bad_offset: slot 1"},
        {"misaligned offset", [](auto& m) { store(m, offsets_entry(1), load<std::uint64_t>(m, offsets_entry(1)) + 4); },
         0, "bad_alignment: slot 1"},
        {"stream map of a size that is no multiple of 8",
         [](auto& m) { poke(m, 0, &Mep_header::stream_map_bytes, std::uint32_t{12}); }, 0,
         "bad_alignment: stream map of 12 bytes"},
        {"stream map past the MEP", [](auto& m) { poke(m, 0, &Mep_header::stream_map_bytes, std::uint32_t{1} << 30); },
         0, "MEP truncated: 3 sources and a 1073741824-byte stream map"},
        // The map starts after the offsets: slot 0's count (u16), then "velo-0" (u8 length, bytes).
        {"stream name damaged", [](auto& m) { m[stream_map_at + 3] = std::byte{' '}; }, 0,
         "MEP bad_stream_map: stream map: slot 0: the name at byte 2 is not a stream name"},
        {"stream count past the map", [](auto& m) { m[stream_map_at] = std::byte{200}; }, 0, "bad_stream_map"},
        {"another stream in slot 0", [](auto& m) { m[stream_map_at + 3] = std::byte{'w'}; }, 0,
         "MEP stream map slot 0 holds streams welo-0, expected velo-0"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        std::vector<std::byte> mep = intact_mep();
        c.damage(mep);
        Parse_error_counts errors;
        Mep_checker check = checker(errors);
        const Mep_verdict verdict = check.check(mep);
        EXPECT_EQ(verdict.events_complete, c.complete);
        EXPECT_EQ(verdict.events_complete + verdict.events_incomplete, events);
        if (*c.problem == '\0') EXPECT_EQ(verdict.first_problem, "");
        else EXPECT_NE(verdict.first_problem.find(c.problem), std::string::npos) << verdict.first_problem;
    }
}

// A MEP that lacks a stream of the run holds no complete event; per stream,
// the checker counts the events that held it intact and those that lacked
// it, over every map it was given.
TEST(MepChecker, CountsPerStreamTheEventsThatHeldOrLackedIt) {
    Parse_error_counts errors;
    Mep_checker check = checker(errors);
    std::vector<std::byte> damaged = intact_mep();
    damaged[payload_at(damaged, 2, 4)] ^= std::byte{1};
    EXPECT_EQ(check.check(intact_mep()).events_complete, events);
    EXPECT_EQ(check.check(damaged).events_complete, events - 1);
    EXPECT_EQ(check.stream_tallies(), (std::map<std::string, Stream_tally>{
                                          {"velo-0", {2 * events, 0}}, {"ut-2a", {2 * events - 1, 1}}, {"ut-2b", {2 * events - 1, 1}}}));

    // A failover: slot 0's server is lost and its streams unread; the spare
    // on slot 1 reads its own.
    const Stream_map after{{{}, {"spare-1"}, {"ut-2a", "ut-2b"}}, {"velo-0"}};
    check.expect_sources({0, 1, 2}, after);
    const Mep_verdict lacking = check.check(intact_mep(first_event, after));
    EXPECT_EQ(lacking.events_complete, 0u) << "every event lacks velo-0";
    EXPECT_NE(lacking.first_problem.find("lacks velo-0 (unread since a failure)"), std::string::npos) << lacking.first_problem;
    EXPECT_EQ(errors.get(Parse_error::wrong_streams) + errors.get(Parse_error::bad_stream_map), 0u) << "no MEP was malformed";
    EXPECT_EQ(check.stream_tallies(),
              (std::map<std::string, Stream_tally>{{"velo-0", {2 * events, events}},
                                                   {"spare-1", {events, 0}},
                                                   {"ut-2a", {3 * events - 1, 1}},
                                                   {"ut-2b", {3 * events - 1, 1}}}));

    // The old map on a MEP of the new epoch is no match: rejected, its
    // events hold no stream.
    EXPECT_EQ(check.check(intact_mep()).events_complete, 0u);
    EXPECT_EQ(errors.get(Parse_error::wrong_streams), 1u);
    EXPECT_EQ(check.stream_tallies(),
              (std::map<std::string, Stream_tally>{{"velo-0", {2 * events, 2 * events}},
                                                   {"spare-1", {events, events}},
                                                   {"ut-2a", {3 * events - 1, events + 1}},
                                                   {"ut-2b", {3 * events - 1, events + 1}}}));
}

// Slots checked in parts on threads: the same verdict, counts, per-stream
// tallies and first problem (in slot order) as checked by one.
TEST(MepChecker, CheckedInPartsOnThreadsTheVerdictIsTheSame) {
    Data_threads threads(3, Busy_poll(std::chrono::microseconds(0)));
    std::vector<std::byte> mep = intact_mep();
    mep[payload_at(mep, 2, 7)] ^= std::byte{1};   // event 7, in the last part's slot
    mep[payload_at(mep, 1, 4)] ^= std::byte{1};   // event 4, in the middle one's: its problem comes first
    Parse_error_counts alone_errors, parted_errors;
    Mep_checker alone = checker(alone_errors), parted = checker(parted_errors, streams, &threads);
    for (int round = 0; round < 2; ++round) {  // the parts' state is reused
        const Mep_verdict expected = alone.check(mep), got = parted.check(mep);
        EXPECT_EQ(got.events_complete, events - 2);
        EXPECT_EQ(got.events_complete, expected.events_complete);
        EXPECT_EQ(got.events_incomplete, expected.events_incomplete);
        EXPECT_EQ(got.first_problem, expected.first_problem);
        EXPECT_NE(got.first_problem.find("source 1 event 24"), std::string::npos) << got.first_problem;
    }
    EXPECT_EQ(parted.stream_tallies(), alone.stream_tallies());
    EXPECT_EQ(parted.check(intact_mep()).events_complete, events) << "no damage carried over";
}

TEST(MepChecker, ForgetsDamageOfThePreviousMep) {
    Parse_error_counts errors;
    Mep_checker check = checker(errors);
    std::vector<std::byte> damaged = intact_mep();
    damaged[payload_at(damaged, 1, 4)] ^= std::byte{1};
    EXPECT_EQ(check.check(damaged).events_incomplete, 1u);
    EXPECT_EQ(check.check(intact_mep()).events_complete, events);
}

TEST(MepChecker, CountsRejectionsByKind) {
    Parse_error_counts errors;
    Mep_checker check = checker(errors);
    std::vector<std::byte> mep = intact_mep();
    poke(mep, mfp_at(mep, 0), &Mfp_header::magic, std::uint16_t{0});
    poke(mep, mfp_at(mep, 2), &Mfp_header::magic, std::uint16_t{0});
    check.check(mep);
    check.check(std::vector<std::byte>(3));
    EXPECT_EQ(errors.get(Parse_error::bad_magic), 2u);
    EXPECT_EQ(errors.get(Parse_error::truncated), 1u);
    EXPECT_EQ(errors.get(Parse_error::wrong_source), 0u);
}

TEST(MepChecker, ReportsAGapInTheMepSequence) {
    Parse_error_counts errors;
    Mep_checker check = checker(errors);
    check.expect_sequence(first_event, 30);
    EXPECT_EQ(check.check(intact_mep(first_event)).first_problem, "");
    const Mep_verdict skipped = check.check(intact_mep(first_event + 60));
    EXPECT_EQ(skipped.events_complete, events) << "the MEP itself is intact";
    EXPECT_NE(skipped.first_problem.find("MEP starts at event 80, expected 50"), std::string::npos)
        << skipped.first_problem;
    EXPECT_EQ(errors.get(Parse_error::wrong_event_range), 1u);
    EXPECT_EQ(check.check(intact_mep(first_event + 90)).first_problem, "") << "checking resumes from there";
}

// A MEP the BU dropped (skip_mep) is no gap; a consumer that does not see
// the drops accepts whole MEPs missing ahead, counted, but nothing behind
// or off the stride.
TEST(MepChecker, MepsTheBuDroppedAreNoGap) {
    Parse_error_counts errors;
    Mep_checker check = checker(errors);
    check.expect_sequence(first_event, 30);
    EXPECT_EQ(check.check(intact_mep(first_event)).first_problem, "");
    check.skip_mep();
    EXPECT_EQ(check.check(intact_mep(first_event + 60)).first_problem, "") << "the BU dropped the one at +30";
    EXPECT_EQ(errors.get(Parse_error::wrong_event_range), 0u);

    Mep_checker consumer = checker(errors);
    consumer.accept_dropped_meps();
    consumer.expect_sequence(first_event, 30);
    EXPECT_EQ(consumer.check(intact_mep(first_event + 90)).first_problem, "") << "three MEPs dropped at the BU";
    EXPECT_EQ(consumer.skipped_meps(), 3u);
    EXPECT_EQ(errors.get(Parse_error::wrong_event_range), 0u);
    EXPECT_NE(consumer.check(intact_mep(first_event + 90)).first_problem, "") << "the same MEP again";
    EXPECT_NE(consumer.check(intact_mep(first_event + 130)).first_problem, "") << "off the stride";
    EXPECT_EQ(errors.get(Parse_error::wrong_event_range), 2u);
    EXPECT_EQ(consumer.skipped_meps(), 3u);
}

}  // namespace
}  // namespace eb
