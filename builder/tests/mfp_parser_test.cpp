#include "formats/mfp_parser.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "formats/mfp.hpp"

namespace eb {
namespace {

const std::vector<std::uint16_t> sizes = {5, 17, 0, 8};

std::vector<std::byte> good_mfp() {
    std::vector<std::byte> mfp(mfp_bytes(sizes));
    write_mfp(mfp, {.source_id = 3, .first_event_id = 400, .type = 1}, sizes);
    return mfp;
}

template <class Field>
void poke(std::vector<std::byte>& mfp, Field Mfp_header::*field, Field value) {
    auto header = load<Mfp_header>(mfp, 0);
    header.*field = value;
    store(mfp, 0, header);
}

TEST(MfpParser, NamesWhatIsWrong) {
    struct Case {
        const char* name;
        std::function<void(std::vector<std::byte>&)> damage;
        Parse_error error;
        const char* detail;
    };
    const std::size_t size_table = sizeof(Mfp_header) + sizes.size();
    const Case cases[] = {
        {"intact", [](auto&) {}, Parse_error::none, ""},
        {"empty", [](auto& m) { m.clear(); }, Parse_error::truncated, "0 bytes, shorter than the 32-byte header"},
        {"magic", [](auto& m) { poke(m, &Mfp_header::magic, std::uint16_t{0x1234}); }, Parse_error::bad_magic,
         "magic 0x1234, expected 0x40ce"},
        {"version", [](auto& m) { poke(m, &Mfp_header::version, std::uint16_t{7}); }, Parse_error::bad_version,
         "version 7"},
        {"alignment", [](auto& m) { poke(m, &Mfp_header::align_log2, std::uint8_t{40}); }, Parse_error::bad_alignment,
         "align_log2 40"},
        {"cut short", [](auto& m) { m.resize(m.size() - 1); }, Parse_error::size_mismatch, "header says"},
        {"total bytes lie too", [](auto& m) {
             m.resize(m.size() - 8);
             poke(m, &Mfp_header::total_bytes, std::uint64_t{m.size()});
         }, Parse_error::fragment_overflow, "fragment 3 of 8 bytes"},
        {"fragment count beyond the packet",
         [](auto& m) { poke(m, &Mfp_header::fragment_count, std::uint32_t{0xFFFFFFFF}); }, Parse_error::truncated,
         "4294967295 fragments need"},
        {"size beyond the packet", [&](auto& m) { store(m, size_table + 2, std::uint16_t{0xFFFF}); },
         Parse_error::fragment_overflow, "fragment 1 of 65535 bytes"},
        {"size too small", [&](auto& m) { store(m, size_table + 2, std::uint16_t{1}); }, Parse_error::trailing_bytes,
         "16 bytes after the last fragment"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        std::vector<std::byte> mfp = good_mfp();
        c.damage(mfp);
        Mfp_view view;
        const Parse_status status = parse_mfp(mfp, view);
        EXPECT_EQ(status.error, c.error) << status.detail;
        EXPECT_NE(status.detail.find(c.detail), std::string::npos) << status.detail;
        if (!status.ok()) {
            EXPECT_TRUE(view.bytes.empty()) << "no view of a rejected MFP";
        }
    }
}

TEST(MfpParser, ChecksWhereTheMfpBelongs) {
    const std::vector<std::byte> mfp = good_mfp();
    Mfp_view view;
    EXPECT_TRUE(parse_mfp(mfp, {3, 400, 4}, view).ok());
    EXPECT_TRUE(parse_mfp(mfp, {std::nullopt, 400, 4}, view).ok());
    EXPECT_EQ(parse_mfp(mfp, {2, 400, 4}, view).error, Parse_error::wrong_source);
    EXPECT_EQ(parse_mfp(mfp, {3, 404, 4}, view).error, Parse_error::wrong_event_range);
    EXPECT_EQ(parse_mfp(mfp, {3, 400, 5}, view).error, Parse_error::wrong_fragment_count);
}

TEST(MfpParser, EveryErrorHasADistinctName) {
    std::vector<std::string_view> names;
    for (std::size_t kind = 0; kind < parse_error_kinds; ++kind) {
        const auto name = parse_error_name(static_cast<Parse_error>(kind));
        EXPECT_NE(name, "unknown");
        EXPECT_EQ(std::count(names.begin(), names.end(), name), 0) << name;
        names.push_back(name);
    }
}

}  // namespace
}  // namespace eb
