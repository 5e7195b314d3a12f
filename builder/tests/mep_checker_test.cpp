#include "mep_checker.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

#include "mep_layout.hpp"
#include "mfp.hpp"
#include "wire_format.hpp"

namespace eb {
namespace {

constexpr std::uint32_t sources = 3;
constexpr std::uint32_t events = 10;
constexpr std::uint32_t payload_bytes = 24;
constexpr std::uint64_t first_event = 20;

// An intact MEP as a BU would assemble it from generator MFPs.
std::vector<std::byte> intact_mep() {
    const std::vector<std::uint64_t> sizes(sources, mfp_bytes(events, payload_bytes));
    const Mep_layout layout = mep_layout(sizes);
    std::vector<std::byte> mep(layout.total_bytes);
    write_mep_header(mep, layout, first_event, events);
    for (std::uint32_t s = 0; s < sources; ++s)
        write_mfp(std::span(mep).subspan(layout.offsets[s], sizes[s]),
                  {.source_id = s, .first_event_id = first_event, .fragment_count = events, .payload_bytes = payload_bytes});
    return mep;
}

std::size_t offsets_entry(std::uint32_t source) { return sizeof(Mep_header) + 8 * source; }
std::size_t mfp_at(const std::vector<std::byte>& mep, std::uint32_t source) {
    return load<std::uint64_t>(mep, offsets_entry(source));
}
std::size_t fragment_at(const std::vector<std::byte>& mep, std::uint32_t source, std::uint32_t event) {
    return mfp_at(mep, source) + sizeof(Mfp_header) + event * fragment_stride(payload_bytes);
}

template <class Header, class Field>
void poke(std::vector<std::byte>& bytes, std::size_t at, Field Header::*field, Field value) {
    auto header = load<Header>(bytes, at);
    header.*field = value;
    store(bytes, at, header);
}

Mep_checker checker() {
    std::vector<std::uint32_t> ids(sources);
    std::iota(ids.begin(), ids.end(), 0u);
    return Mep_checker(ids, events);
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
        {"payload byte flipped", [](auto& m) { m[fragment_at(m, 1, 4) + 16 + 5] ^= std::byte{1}; }, 9,
         "source 1 event 24"},
        {"last payload byte of the MEP flipped", [](auto& m) { m[fragment_at(m, 2, 9) + 16 + 23] ^= std::byte{1}; }, 9,
         "source 2 event 29"},
        {"fragment carries another event id",
         [](auto& m) { poke(m, fragment_at(m, 2, 7), &Fragment_header::event_id, std::uint64_t{999}); }, 9,
         "fragment says event 999"},
        {"fragment carries another source id",
         [](auto& m) { poke(m, fragment_at(m, 0, 0), &Fragment_header::source_id, std::uint32_t{2}); }, 9,
         "source 0 event 20"},
        {"fragment size runs past the MFP: the rest of that source is lost",
         [](auto& m) { poke(m, fragment_at(m, 0, 3), &Fragment_header::size, std::uint32_t{1} << 30); }, 3,
         "runs past the MFP end"},
        {"MFP magic", [](auto& m) { poke(m, mfp_at(m, 2), &Mfp_header::magic, std::uint16_t{0xBAD}); }, 0,
         "MFP header in the slot of source 2"},
        {"MFP of another event range",
         [](auto& m) { poke(m, mfp_at(m, 1), &Mfp_header::first_event_id, std::uint64_t{30}); }, 0,
         "first event 30 (expected 20)"},
        {"MFP of another source in the slot",
         [](auto& m) { poke(m, mfp_at(m, 1), &Mfp_header::source_id, std::uint32_t{2}); }, 0, "slot of source 1"},
        {"MFP with fewer fragments",
         [](auto& m) { poke(m, mfp_at(m, 1), &Mfp_header::fragment_count, std::uint32_t{9}); }, 0, "fragments 9"},
        {"MFP too short for its last fragment: only that event is lost",
         [](auto& m) {
             poke(m, mfp_at(m, 1), &Mfp_header::total_bytes, std::uint64_t{mfp_bytes(events, payload_bytes) - 40});
         },
         9, "fragment header beyond the MFP end"},
        {"MFP longer than its fragments: its extent is untrustworthy",
         [](auto& m) {
             poke(m, mfp_at(m, 0), &Mfp_header::total_bytes, std::uint64_t{mfp_bytes(events, payload_bytes) + 8});
         },
         0, "bytes after its last fragment"},
        {"MEP magic", [](auto& m) { poke(m, 0, &Mep_header::magic, std::uint16_t{0xBAD}); }, 0, "magic 0xbad"},
        {"MEP missing a source", [](auto& m) { poke(m, 0, &Mep_header::source_count, std::uint32_t{2}); }, 0,
         "holds 2 sources, expected 3"},
        {"MEP of another packing factor", [](auto& m) { poke(m, 0, &Mep_header::event_count, std::uint32_t{11}); }, 0,
         "holds 11 events"},
        {"MEP cut short", [](auto& m) { m.resize(m.size() - 8); }, 0, "buffer has"},
        {"MEP empty", [](auto& m) { m.clear(); }, 0, "shorter than its header"},
        {"offset overlapping the previous MFP",
         [](auto& m) { store(m, offsets_entry(2), load<std::uint64_t>(m, offsets_entry(1))); }, 0, "slot 2 has offset"},
        {"offset beyond the MEP", [](auto& m) { store(m, offsets_entry(1), std::uint64_t{1} << 40); }, 0,
         "slot 1 has offset"},
        {"MFPs of two sources swapped",
         [](auto& m) {
             const auto first = load<std::uint64_t>(m, offsets_entry(0));
             store(m, offsets_entry(0), load<std::uint64_t>(m, offsets_entry(1)));
             store(m, offsets_entry(1), first);
         },
         0, "slot of source 0"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        std::vector<std::byte> mep = intact_mep();
        c.damage(mep);
        Mep_checker check = checker();
        const Mep_verdict verdict = check.check(mep);
        EXPECT_EQ(verdict.events_complete, c.complete);
        EXPECT_EQ(verdict.events_complete + verdict.events_incomplete, events);
        if (*c.problem == '\0') EXPECT_EQ(verdict.first_problem, "");
        else EXPECT_NE(verdict.first_problem.find(c.problem), std::string::npos) << verdict.first_problem;
    }
}

TEST(MepChecker, ForgetsDamageOfThePreviousMep) {
    Mep_checker check = checker();
    std::vector<std::byte> damaged = intact_mep();
    damaged[fragment_at(damaged, 1, 4) + 16] ^= std::byte{1};
    EXPECT_EQ(check.check(damaged).events_incomplete, 1u);
    EXPECT_EQ(check.check(intact_mep()).events_complete, events);
}

}  // namespace
}  // namespace eb
