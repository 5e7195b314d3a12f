#include "control/configure_request.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace eb {
namespace {

using Json = nlohmann::json;

// The example of operator/docs/rank-table.md, as the operator sends it.
constexpr std::string_view example_table = R"({
 "version": "eventbuilder.daq.io/ranktable/v1",
 "run": "small",
 "fabric": "small",
 "epoch": 2,
 "layout": "Folded",
 "ranks": [
  {"rank": 0, "address": "small-eb-0.small-eb:7000", "state": "live", "unit": 0, "function": "RU+BU",
   "sources": ["eb0-tell40-0a", "eb0-tell40-0b"], "endpoint": "eb0-numa0", "node": "eb0", "numa": 0,
   "rdmaDevice": "mlx5_0", "netdev": "ib0", "leaf": 0, "port": 0},
  {"rank": 1, "address": "small-eb-1.small-eb:7000", "state": "dummy", "spare": true,
   "endpoint": "eb0-numa1", "node": "eb0", "numa": 1, "rdmaDevice": "mlx5_1", "netdev": "ib1", "leaf": 0, "port": 1},
  {"rank": 2, "address": "small-eb-2.small-eb:7000", "state": "dummy", "leaf": 0, "port": 2}
 ]
})";

std::string body_with(Rank rank, std::string_view table) {
    return R"({"rank": )" + std::to_string(rank) + R"(, "table": )" + std::string(table) + "}";
}

TEST(ConfigureRequest, ReadsTheDocumentedExample) {
    const auto parsed = parse_configure_request(body_with(0, example_table), std::nullopt);
    const auto* request = std::get_if<Configure_request>(&parsed);
    ASSERT_NE(request, nullptr) << std::get<std::string>(parsed);
    const Configure_request expected{0,
                                     2,
                                     {{"small-eb-0.small-eb", 7000},
                                      {"small-eb-1.small-eb", 7000},
                                      {"small-eb-2.small-eb", 7000}},
                                     {Rank_function::ru_bu, Rank_function::dummy, Rank_function::dummy},
                                     "small",
                                     0,
                                     {},
                                     {{{"eb0-tell40-0a", "eb0-tell40-0b"}, {}, {}}, {}}};
    EXPECT_EQ(*request, expected);

    // The process's --rank, when given, is the one the body must name.
    EXPECT_TRUE(std::holds_alternative<Configure_request>(parse_configure_request(body_with(0, example_table), 0)));
}

TEST(ConfigureRequest, ReadsUnfoldedTablesAndOptionalRun) {
    // Any rank may run the RU or the BU: the table says which, not parity.
    const std::string table = R"({"version": "eventbuilder.daq.io/ranktable/v1", "epoch": 7, "layout": "Unfolded",
        "ranks": [{"rank": 0, "address": "10.0.0.1:7000", "state": "live", "function": "BU"},
                  {"rank": 1, "address": "10.0.0.1:7001", "state": "live", "function": "RU"},
                  {"rank": 2, "address": "[::1]:7000", "state": "dummy", "function": "RU+BU"}]})";
    const auto parsed = parse_configure_request(body_with(2, table), 2);
    const auto* request = std::get_if<Configure_request>(&parsed);
    ASSERT_NE(request, nullptr) << std::get<std::string>(parsed);
    EXPECT_EQ(request->rank, 2u) << "a dummy rank may be configured: it waits on standby";
    EXPECT_EQ(request->epoch, 7u);
    EXPECT_EQ(request->peers[2], (Peer_address{"[::1]", 7000}));
    EXPECT_EQ(request->functions,
              (std::vector<Rank_function>{Rank_function::bu, Rank_function::ru, Rank_function::dummy}))
        << "a dummy's function is ignored";
    EXPECT_EQ(request->run, "");
    EXPECT_EQ(request->resume_event, 0u) << "absent: no hint";
}

TEST(ConfigureRequest, ReadsPartlyUnfoldedUnitsInAFoldedTable) {
    // A unit whose RU went with its server's fibres builds on as a BU
    // alone; one whose BU moved to a working machine reads on as an RU.
    const std::string table = R"({"version": "eventbuilder.daq.io/ranktable/v1", "epoch": 3, "layout": "Folded",
        "ranks": [{"rank": 0, "address": "10.0.0.1:7000", "state": "live"},
                  {"rank": 1, "address": "10.0.0.1:7001", "state": "live", "function": "BU"},
                  {"rank": 2, "address": "10.0.0.1:7002", "state": "live", "function": "RU"}]})";
    const auto parsed = parse_configure_request(body_with(1, table), 1);
    const auto* request = std::get_if<Configure_request>(&parsed);
    ASSERT_NE(request, nullptr) << std::get<std::string>(parsed);
    EXPECT_EQ(request->functions, (std::vector<Rank_function>{Rank_function::ru_bu, Rank_function::bu, Rank_function::ru}));
    EXPECT_TRUE(request->unread_sources.empty()) << "a BU alone reads nothing, but its unit's source may be read elsewhere";
}

TEST(ConfigureRequest, ReadsUnreadSources) {
    // Rank 1's unit lost its fibres: its BU builds on, and every MEP keeps
    // its slot, as missing. A dummy's sourceUnread is ignored.
    const std::string table = R"({"version": "eventbuilder.daq.io/ranktable/v1", "epoch": 3, "layout": "Folded",
        "ranks": [{"rank": 0, "address": "10.0.0.1:7000", "state": "live", "sourceUnread": false},
                  {"rank": 1, "address": "10.0.0.1:7001", "state": "live", "function": "BU", "sourceUnread": true},
                  {"rank": 2, "address": "10.0.0.1:7002", "state": "dummy", "sourceUnread": true}]})";
    const auto parsed = parse_configure_request(body_with(0, table), 0);
    const auto* request = std::get_if<Configure_request>(&parsed);
    ASSERT_NE(request, nullptr) << std::get<std::string>(parsed);
    EXPECT_EQ(request->unread_sources, (std::vector<Rank>{1}));
}

// The example with changes at JSON pointers: a value, or (nullopt) removed.
std::string changed(std::initializer_list<std::pair<const char*, std::optional<Json>>> changes) {
    Json body = {{"rank", 0}, {"table", Json::parse(example_table)}};
    for (const auto& [pointer, value] : changes) {
        if (value)
            body[Json::json_pointer(pointer)] = *value;
        else
            body[Json::json_pointer(pointer).parent_pointer()].erase(Json::json_pointer(pointer).back());
    }
    return body.dump();
}
std::string changed(const char* pointer, const std::optional<Json>& value) { return changed({{pointer, value}}); }

TEST(ConfigureRequest, ReadsTheResumeHint) {
    const auto hinted = parse_configure_request(changed("/table/resumeEvent", 123000), std::nullopt);
    ASSERT_TRUE(std::holds_alternative<Configure_request>(hinted)) << std::get<std::string>(hinted);
    EXPECT_EQ(std::get<Configure_request>(hinted).resume_event, 123000u);
}

TEST(ConfigureRequest, ErrorsNameTheFieldAndTheFix) {
    struct Case {
        std::string body;
        std::string error;
        std::optional<Rank> required_rank = std::nullopt;
    };
    const std::string table(example_table);
    const Case cases[] = {
        // Not the expected document at all.
        {"", "request body: not valid JSON at byte 1: "},
        {R"({"rank": 0, "table": )", "request body: not valid JSON at byte 22: "},
        {"[1, 2]", "request body (an array): expected a JSON object {\"rank\": R, \"table\": {...}}"},
        {"{}", "rank: missing; expected this unit's rank in the table, a whole number >= 0"},
        {changed("/rank", -1), "rank '-1': expected a whole number >= 0"},
        {changed("/rank", 1.5), "rank '1.5': expected a whole number >= 0"},
        {changed("/rank", "0"), "rank '0': expected a whole number >= 0"},
        {changed("/table", std::nullopt), "table: missing; expected the rank table document"},
        {changed("/table", "x"), "table 'x': expected an object, the rank table document"},
        // The table's header.
        {changed("/table/version", "v0"), "table.version 'v0': expected eventbuilder.daq.io/ranktable/v1"},
        {changed("/table/version", std::nullopt), "table.version: missing; expected eventbuilder.daq.io/ranktable/v1"},
        {changed("/table/run", 3), "table.run '3': expected a string, the run's name"},
        {changed("/table/epoch", 0), "table.epoch '0': expected a whole number >= 1"},
        {changed("/table/epoch", "2"), "table.epoch '2': expected a whole number >= 1"},
        {changed("/table/epoch", std::nullopt), "table.epoch: missing; expected a whole number >= 1"},
        {changed("/table/resumeEvent", -5), "table.resumeEvent '-5': expected a whole number >= 0"},
        {changed("/table/layout", "folded"), "table.layout 'folded': expected Folded or Unfolded"},
        {changed("/table/layout", std::nullopt), "table.layout: missing; expected Folded or Unfolded"},
        {changed("/table/ranks", Json::array()),
         "table.ranks (an empty array): expected a non-empty array with one entry per rank"},
        {changed("/table/ranks", Json::object()), "table.ranks (an empty object): expected a non-empty array"},
        {changed("/table/ranks", std::nullopt), "table.ranks: missing; expected an array with one entry per rank"},
        // The entries.
        {changed("/table/ranks/1", 1), "table.ranks[1] '1': expected an object {\"rank\": 1, \"address\": "},
        {changed("/table/ranks/2/rank", 3),
         "table.ranks[2].rank '3': expected 2, its position in table.ranks (entries in rank order, one per rank)"},
        {changed("/table/ranks/2/rank", std::nullopt), "table.ranks[2].rank: missing; expected 2, its position"},
        {changed("/table/ranks/2/address", "x"),
         "table.ranks[2].address 'x': expected host:port, e.g. run-eb-2.run-eb:7000"},
        {changed("/table/ranks/0/address", ":7000"), "table.ranks[0].address ':7000': expected host:port"},
        {changed("/table/ranks/0/address", "a:0"), "table.ranks[0].address 'a:0': expected host:port"},
        {changed("/table/ranks/0/address", "a:65536"), "table.ranks[0].address 'a:65536': expected host:port"},
        {changed("/table/ranks/0/address", "a:"), "table.ranks[0].address 'a:': expected host:port"},
        {changed("/table/ranks/0/address", 7000), "table.ranks[0].address '7000': expected host:port"},
        {changed("/table/ranks/1/address", std::nullopt),
         "table.ranks[1].address: missing; expected host:port, e.g. run-eb-1.run-eb:7000"},
        {changed("/table/ranks/2/address", "small-eb-0.small-eb:7000"),
         "table.ranks[2].address 'small-eb-0.small-eb:7000': same as table.ranks[0].address; every rank needs its "
         "own host:port"},
        {changed("/table/ranks/1/state", "spare"), "table.ranks[1].state 'spare': expected live or dummy"},
        {changed("/table/ranks/1/state", std::nullopt), "table.ranks[1].state: missing; expected live or dummy"},
        // What a live rank runs: its function, which the layout decides.
        {changed("/table/ranks/0/function", "ru+bu"),
         "table.ranks[0].function 'ru+bu': expected RU+BU or none (layout Folded), or RU or BU for a partly unfolded "
         "unit"},
        {changed("/table/ranks/0/function", 3), "table.ranks[0].function '3': expected RU+BU or none"},
        {changed("/table/layout", "Unfolded"),
         "table.ranks[0].function 'RU+BU': expected RU or BU (layout Unfolded runs a unit's RU and BU on two ranks)"},
        {changed({{"/table/layout", "Unfolded"}, {"/table/ranks/0/function", std::nullopt}}),
         "table.ranks[0].function: missing; expected RU or BU (layout Unfolded runs a unit's RU and BU on two ranks)"},
        {changed({{"/table/layout", "Unfolded"}, {"/table/ranks/0/function", "ru"}}),
         "table.ranks[0].function 'ru': expected RU or BU"},
        {changed("/table/ranks/0/sourceUnread", true),
         "table.ranks[0].sourceUnread: true on a rank that runs an RU; set function BU (the unit's BU alone), or "
         "remove sourceUnread where the rank reads its streams"},
        {changed("/table/ranks/0/sourceUnread", "yes"), "table.ranks[0].sourceUnread 'yes': expected true or false"},
        // The rank in the table, and the table as a whole.
        {changed("/rank", 3), "rank 3: not in table.ranks (0..2); expected this unit's rank in the table"},
        {changed("/rank", 4294967296), "rank 4294967296: not in table.ranks (0..2)"},
        {body_with(1, table), "rank 1: this process was started with --rank 2; send rank 2 or start it without --rank",
         2},
        {changed("/table/ranks/0/state", "dummy"), "table.ranks: no live rank runs an RU; make at least one rank live"},
        {changed({{"/table/layout", "Unfolded"}, {"/table/ranks/0/function", "RU"}}),
         "table.ranks: no live rank runs a BU; make at least one rank live with function BU"},
        {changed({{"/table/layout", "Unfolded"}, {"/table/ranks/0/function", "BU"}, {"/table/ranks/0/sources", Json::array()}}),
         "table.ranks: no live rank runs an RU; make at least one rank live with function RU"},
        // Readout streams: named as the Fabric names them, each in one place.
        {changed("/table/ranks/0/sources", "eb0-tell40-0a"), "table.ranks[0].sources: expected an array of stream names"},
        {changed("/table/ranks/0/sources/1", "tell 40"),
         "table.ranks[0].sources[1] 'tell 40': expected a stream name of 1 to 128 characters, letters, digits and . _ : / "
         "- (starting with a letter or digit), as the Fabric's endpoints[].streams"},
        {changed("/table/ranks/0/sources/0", "-a"), "table.ranks[0].sources[0] '-a': expected a stream name"},
        {changed("/table/ranks/0/sources/0", ""), "table.ranks[0].sources[0] '': expected a stream name"},
        {changed("/table/ranks/0/sources/0", std::string(129, 'a')), "table.ranks[0].sources[0] 'aaaa"},
        {changed("/table/ranks/0/sources/0", 7), "table.ranks[0].sources[0] '7': expected a stream name"},
        {changed("/table/ranks/0/sources/1", "eb0-tell40-0a"),
         "table.ranks[0].sources[1] 'eb0-tell40-0a': also at table.ranks[0].sources[0]; each stream is read by one RU or "
         "listed unread once"},
        {changed("/table/unreadStreams", Json::array({"eb1-tell40-0a", "eb0-tell40-0b"})),
         "table.unreadStreams[1] 'eb0-tell40-0b': also at table.ranks[0].sources[1]; each stream is read by one RU or "
         "listed unread once"},
        {changed("/table/unreadStreams", "eb1-tell40-0a"), "table.unreadStreams: expected an array of stream names"},
        {changed("/table/unreadStreams", Json::array({"ok", "not ok"})),
         "table.unreadStreams[1] 'not ok': expected a stream name"},
        {changed("/table/ranks/0/function", "BU"),
         "table.ranks[0].sources: on a rank that runs no RU (function BU); a BU reads no streams: remove them"},
    };
    for (const auto& c : cases) {
        const auto parsed = parse_configure_request(c.body, c.required_rank);
        const auto* error = std::get_if<std::string>(&parsed);
        ASSERT_NE(error, nullptr) << c.body;
        EXPECT_TRUE(error->starts_with(c.error)) << "got:  " << *error << "\nwant: " << c.error;
    }
}

// A readout driver reads its pod's table with Live_ranks::optional: one
// in which every unit failed with no spare left is still a table (a
// spare's), checked in every other way.
TEST(ConfigureRequest, ATableWithNoLiveRankIsReadWhereLiveRanksAreOptional) {
    Json body = {{"rank", 1}, {"table", Json::parse(example_table)}};
    body["table"]["ranks"][0]["state"] = "dummy";
    const auto required = parse_configure_request(body.dump(), 1);
    ASSERT_TRUE(std::holds_alternative<std::string>(required));
    EXPECT_TRUE(std::get<std::string>(required).starts_with("table.ranks: no live rank runs an RU"));

    const auto optional = parse_configure_request(body.dump(), 1, Live_ranks::optional);
    const auto* request = std::get_if<Configure_request>(&optional);
    ASSERT_NE(request, nullptr) << std::get<std::string>(optional);
    EXPECT_EQ(request->functions, std::vector<Rank_function>(3, Rank_function::dummy));

    body["table"]["ranks"][2]["address"] = "small-eb-1.small-eb:7000";
    const auto bad = parse_configure_request(body.dump(), 1, Live_ranks::optional);
    ASSERT_TRUE(std::holds_alternative<std::string>(bad));
    EXPECT_TRUE(std::get<std::string>(bad).starts_with("table.ranks[2].address 'small-eb-1.small-eb:7000': same as"))
        << std::get<std::string>(bad);
}

// The streams every MEP names: each RU's, in slot order, and the run's
// unread ones. A dummy's sources are ignored like its other fields, and
// stream names may use every character the Fabric's pattern allows.
TEST(ConfigureRequest, ReadsTheReadoutStreams) {
    Json body = {{"rank", 1}, {"table", Json::parse(example_table)}};
    body["table"]["ranks"][1]["state"] = "live";
    body["table"]["ranks"][1]["sources"] = {"ut:1/a_b.c"};
    body["table"]["ranks"][2]["sources"] = {"eb0-tell40-0a"};
    body["table"]["unreadStreams"] = {"eb1-tell40-0a", "eb1-tell40-0b"};
    const auto parsed = parse_configure_request(body.dump(), std::nullopt);
    const auto* request = std::get_if<Configure_request>(&parsed);
    ASSERT_NE(request, nullptr) << std::get<std::string>(parsed);
    const Readout_streams expected{{{"eb0-tell40-0a", "eb0-tell40-0b"}, {"ut:1/a_b.c"}, {}},
                                   {"eb1-tell40-0a", "eb1-tell40-0b"}};
    EXPECT_EQ(request->streams, expected);
}

TEST(ConfigureRequest, BoundsTheTableSize) {
    Json ranks = Json::array();
    for (std::size_t rank = 0; rank <= max_table_ranks; ++rank)
        ranks.push_back({{"rank", rank}, {"address", "h" + std::to_string(rank) + ":7000"}, {"state", "live"}});
    Json body = {{"rank", 0},
                 {"table", {{"version", rank_table_version}, {"epoch", 1}, {"layout", "Folded"}, {"ranks", ranks}}}};
    auto parsed = parse_configure_request(body.dump(), std::nullopt);
    ASSERT_TRUE(std::holds_alternative<std::string>(parsed));
    EXPECT_EQ(std::get<std::string>(parsed), "table.ranks: 65537 entries; at most 65536");

    // The largest table is fine, and duplicates are still found in it quickly.
    body["table"]["ranks"].erase(max_table_ranks);
    parsed = parse_configure_request(body.dump(), std::nullopt);
    ASSERT_TRUE(std::holds_alternative<Configure_request>(parsed)) << std::get<std::string>(parsed);
    EXPECT_EQ(std::get<Configure_request>(parsed).peers.size(), max_table_ranks);
    body["table"]["ranks"][max_table_ranks - 1]["address"] = "h0:7000";
    parsed = parse_configure_request(body.dump(), std::nullopt);
    ASSERT_TRUE(std::holds_alternative<std::string>(parsed));
    EXPECT_TRUE(std::get<std::string>(parsed).starts_with(
        "table.ranks[65535].address 'h0:7000': same as table.ranks[0]"))
        << std::get<std::string>(parsed);
}

TEST(ConfigureRequest, SurvivesHostileInput) {
    // Deep nesting, invalid UTF-8 in a quoted value, and a huge number: errors, never a crash or a throw.
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    EXPECT_TRUE(std::holds_alternative<std::string>(parse_configure_request(deep, std::nullopt)));
    std::string bad_utf8 = body_with(0, example_table);
    bad_utf8.replace(bad_utf8.find("small-eb-2"), 1, "\xff");
    const auto bad_utf8_error = parse_configure_request(bad_utf8, std::nullopt);
    ASSERT_TRUE(std::holds_alternative<std::string>(bad_utf8_error));
    EXPECT_TRUE(std::get<std::string>(bad_utf8_error).starts_with("request body: not valid JSON at byte "))
        << std::get<std::string>(bad_utf8_error);
    const auto huge = parse_configure_request(R"({"rank": 1e999})", std::nullopt);
    ASSERT_TRUE(std::holds_alternative<std::string>(huge));
    EXPECT_EQ(std::get<std::string>(huge),
              "request body: number overflow parsing '1e999'; expected {\"rank\": R, \"table\": {...}}");
}

}  // namespace
}  // namespace eb
