#include "control/configure_request.hpp"

#include <nlohmann/json.hpp>
#include <limits>
#include <unordered_map>
#include <utility>

#include "base/stream_name.hpp"

namespace eb {
namespace {

using Json = nlohmann::json;

// Thrown inside the parser only; turned into the returned message.
struct Bad_request {
    std::string message;
};

[[noreturn]] void fail(std::string message) { throw Bad_request{std::move(message)}; }

// A value as it appears in messages, after its path: " 'x'" for strings
// (without their quotes) and other scalars (as JSON), cut when long; arrays
// and objects by their kind only, since dumping a deeply nested one would recurse.
std::string shown(const Json& value) {
    if (value.is_array()) return value.empty() ? " (an empty array)" : " (an array)";
    if (value.is_object()) return value.empty() ? " (an empty object)" : " (an object)";
    constexpr std::size_t longest = 80;
    std::string text = value.is_string() ? value.get<std::string>()
                                         : value.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (text.size() > longest) text = text.substr(0, longest) + "...";
    return " '" + text + "'";
}

// The member `key` of `object`, or a message naming `path` and what belongs there.
const Json& member(const Json& object, const char* key, const std::string& path, std::string_view expected) {
    const auto found = object.find(key);
    if (found == object.end()) fail(path + ": missing; expected " + std::string(expected));
    return *found;
}

std::uint64_t whole_number(const Json& value, const std::string& path, std::uint64_t min) {
    // nlohmann keeps non-negative integers as unsigned; -1, 1.5 and "1" are not.
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() < min)
        fail(path + shown(value) + ": expected a whole number >= " + std::to_string(min));
    return value.get<std::uint64_t>();
}

// nlohmann's what() starts with "[json.exception.<kind>.<id>] ", which means nothing to the sender.
std::string without_prefix(const Json::exception& error) {
    std::string_view text = error.what();
    if (const std::size_t at = text.find("] "); text.starts_with("[json.exception.") && at != std::string_view::npos)
        text.remove_prefix(at + 2);
    return std::string(text);
}

std::string entry_path(std::size_t index) { return "table.ranks[" + std::to_string(index) + "]"; }

Layout parse_layout(const Json& table) {
    constexpr std::string_view expected = "Folded or Unfolded";
    const Json& layout = member(table, "layout", "table.layout", expected);
    if (layout == "Folded") return Layout::folded;
    if (layout == "Unfolded") return Layout::unfolded;
    fail("table.layout" + shown(layout) + ": expected " + std::string(expected));
}

// What a live rank runs: table.ranks[i].function. Folded runs a unit's RU
// and BU on one rank (the default), or only one of them where the unit is
// partly unfolded (its RU's readout gone with its server's fibres, or its
// BU moved to a working machine); Unfolded names one of them on every rank.
Rank_function parse_function(const Json& entry, const std::string& path, Layout layout) {
    const auto function = entry.find("function");
    const std::string_view expected = layout == Layout::folded
                                          ? "RU+BU or none (layout Folded), or RU or BU for a partly unfolded unit"
                                          : "RU or BU (layout Unfolded runs a unit's RU and BU on two ranks)";
    if (function == entry.end()) {
        if (layout == Layout::folded) return Rank_function::ru_bu;
        fail(path + ".function: missing; expected " + std::string(expected));
    }
    if (*function == "RU+BU" && layout == Layout::folded) return Rank_function::ru_bu;
    if (*function == "RU") return Rank_function::ru;
    if (*function == "BU") return Rank_function::bu;
    fail(path + ".function" + shown(*function) + ": expected " + std::string(expected));
}

// table.ranks[i].sourceUnread: the unit's readout is unread (its fibres
// went with a failed server), so every MEP holds its slot as missing. Only
// on a live rank that runs no RU; ignored on a dummy, like its other fields.
bool parse_source_unread(const Json& entry, const std::string& path, Rank_function function) {
    const auto unread = entry.find("sourceUnread");
    if (unread == entry.end() || function == Rank_function::dummy) return false;
    if (!unread->is_boolean()) fail(path + ".sourceUnread" + shown(*unread) + ": expected true or false");
    if (unread->get<bool>() && function != Rank_function::bu)
        fail(path + ".sourceUnread: true on a rank that runs an RU; set function BU (the unit's BU alone), or "
             "remove sourceUnread where the rank reads its streams");
    return unread->get<bool>();
}

// Where each stream was named first (its JSON path): a stream is read by
// one RU, or listed unread, once.
using Stream_places = std::unordered_map<std::string, std::string>;

// A list of stream names at `path` (ranks[i].sources, unreadStreams).
std::vector<std::string> parse_streams(const Json& list, const std::string& path, Stream_places& places) {
    if (!list.is_array()) fail(path + ": expected an array of stream names");
    if (list.size() > std::numeric_limits<std::uint16_t>::max())
        fail(path + ": " + std::to_string(list.size()) + " streams; at most 65535");
    std::vector<std::string> names;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string at = path + "[" + std::to_string(i) + "]";
        if (!list[i].is_string() || !valid_stream_name(list[i].get_ref<const std::string&>()))
            fail(at + shown(list[i]) + ": expected " + std::string(stream_name_rule) + ", as the Fabric's endpoints[].streams");
        const std::string& name = list[i].get_ref<const std::string&>();
        if (const auto [first, added] = places.emplace(name, at); !added)
            fail(at + " '" + name + "': also at " + first->second + "; each stream is read by one RU or listed unread once");
        names.push_back(name);
    }
    return names;
}

// table.ranks[i].sources: the streams the rank's RU reads. Ignored on a
// dummy, like its other fields; a BU alone reads none.
std::vector<std::string> parse_rank_streams(const Json& entry, const std::string& path, Rank_function function,
                                            Stream_places& places) {
    const auto sources = entry.find("sources");
    if (sources == entry.end() || function == Rank_function::dummy) return {};
    if (function == Rank_function::bu && !(sources->is_array() && sources->empty()))
        fail(path + ".sources: on a rank that runs no RU (function BU); a BU reads no streams: remove them");
    return parse_streams(*sources, path + ".sources", places);
}

// One entry of table.ranks: its address, and what it runs.
std::pair<Peer_address, Rank_function> parse_entry(const Json& entry, std::size_t index, Layout layout) {
    const std::string path = entry_path(index);
    if (!entry.is_object())
        fail(path + shown(entry) + ": expected an object {\"rank\": " + std::to_string(index) +
             ", \"address\": \"host:port\", \"state\": \"live\"}");
    const Json& rank = member(entry, "rank", path + ".rank", std::to_string(index) + ", its position in table.ranks");
    if (!rank.is_number_unsigned() || rank.get<std::uint64_t>() != index)
        fail(path + ".rank" + shown(rank) + ": expected " + std::to_string(index) +
             ", its position in table.ranks (entries in rank order, one per rank)");

    const std::string example = "host:port, e.g. run-eb-" + std::to_string(index) + ".run-eb:7000";
    const Json& address = member(entry, "address", path + ".address", example);
    const auto parsed = address.is_string() ? parse_peer_address(address.get_ref<const std::string&>())
                                            : Peer_address_error::not_host_port;
    const Peer_address* peer = std::get_if<Peer_address>(&parsed);
    if (peer == nullptr) fail(path + ".address" + shown(address) + ": expected " + example);

    const Json& state = member(entry, "state", path + ".state", "live or dummy");
    if (state != "live" && state != "dummy") fail(path + ".state" + shown(state) + ": expected live or dummy");
    // A dummy's function, if any, is ignored like its other fields.
    return {*peer, state == "live" ? parse_function(entry, path, layout) : Rank_function::dummy};
}

Configure_request parse_document(const Json& body, std::optional<Rank> required_rank, Live_ranks live) {
    if (!body.is_object())
        fail("request body" + shown(body) +
             ": expected a JSON object {\"rank\": R, \"table\": {...}} (table as in operator/docs/rank-table.md)");
    Configure_request request;
    const std::uint64_t rank =
        whole_number(member(body, "rank", "rank", "this unit's rank in the table, a whole number >= 0"), "rank", 0);

    const Json& table = member(body, "table", "table", "the rank table document (operator/docs/rank-table.md)");
    if (!table.is_object())
        fail("table" + shown(table) + ": expected an object, the rank table document (operator/docs/rank-table.md)");
    const Json& version = member(table, "version", "table.version", std::string(rank_table_version));
    if (!version.is_string() || version.get_ref<const std::string&>() != rank_table_version)
        fail("table.version" + shown(version) + ": expected " + std::string(rank_table_version));
    if (const auto run = table.find("run"); run != table.end()) {
        if (!run->is_string()) fail("table.run" + shown(*run) + ": expected a string, the run's name");
        request.run = run->get<std::string>();
    }
    request.epoch = whole_number(member(table, "epoch", "table.epoch", "a whole number >= 1"), "table.epoch", 1);
    if (const auto resume = table.find("resumeEvent"); resume != table.end())
        request.resume_event = whole_number(*resume, "table.resumeEvent", 0);
    const Layout layout = parse_layout(table);

    const Json& ranks = member(table, "ranks", "table.ranks", "an array with one entry per rank");
    if (!ranks.is_array() || ranks.empty())
        fail("table.ranks" + shown(ranks) + ": expected a non-empty array with one entry per rank");
    if (ranks.size() > max_table_ranks)
        fail("table.ranks: " + std::to_string(ranks.size()) + " entries; at most " + std::to_string(max_table_ranks));
    std::unordered_map<std::string, std::size_t> index_of_address;  // a set: 65536 entries make a scan too slow
    Stream_places stream_places;
    for (std::size_t index = 0; index < ranks.size(); ++index) {
        auto [peer, function] = parse_entry(ranks[index], index, layout);
        const std::string address = peer.host + ":" + std::to_string(peer.port);
        if (const auto [same, added] = index_of_address.emplace(address, index); !added)
            fail(entry_path(index) + ".address '" + address + "': same as " + entry_path(same->second) +
                 ".address; every rank needs its own host:port");
        if (parse_source_unread(ranks[index], entry_path(index), function))
            request.unread_sources.push_back(static_cast<Rank>(index));
        request.streams.by_rank.push_back(parse_rank_streams(ranks[index], entry_path(index), function, stream_places));
        request.peers.push_back(std::move(peer));
        request.functions.push_back(function);
    }

    if (const auto unread = table.find("unreadStreams"); unread != table.end())
        request.streams.unread = parse_streams(*unread, "table.unreadStreams", stream_places);

    const auto units = static_cast<Rank>(request.peers.size());
    if (rank >= units)
        fail("rank " + std::to_string(rank) + ": not in table.ranks (0.." + std::to_string(units - 1) +
             "); expected this unit's rank in the table");
    request.rank = static_cast<Rank>(rank);
    if (required_rank && *required_rank != request.rank)
        fail("rank " + std::to_string(rank) + ": this process was started with --rank " +
             std::to_string(*required_rank) + "; send rank " + std::to_string(*required_rank) +
             " or start it without --rank");

    if (live == Live_ranks::optional) return request;
    const Rank_table roles(request.functions, request.unread_sources, request.streams);
    const std::string fix = layout == Layout::folded ? "make at least one rank live"
                                                     : "make at least one rank live with function ";
    if (roles.rus().empty())
        fail("table.ranks: no live rank runs an RU; " + fix + (layout == Layout::folded ? "" : "RU"));
    if (roles.bus().empty())
        fail("table.ranks: no live rank runs a BU; " + fix + (layout == Layout::folded ? "" : "BU"));
    return request;
}

}  // namespace

std::variant<Configure_request, std::string> parse_configure_request(std::string_view body,
                                                                     std::optional<Rank> required_rank,
                                                                     Live_ranks live) {
    Json document;
    try {
        document = Json::parse(body);
    } catch (const Json::parse_error& error) {
        // "parse error at line 1, column 2: <reason>": the byte says where.
        std::string reason = without_prefix(error);
        if (const std::size_t at = reason.find(": "); at != std::string::npos) reason = reason.substr(at + 2);
        return "request body: not valid JSON at byte " + std::to_string(error.byte) + ": " + reason +
               "; expected {\"rank\": R, \"table\": {...}}";
    } catch (const Json::exception& error) {
        return "request body: " + without_prefix(error) + "; expected {\"rank\": R, \"table\": {...}}";  // 1e999
    }
    try {
        return parse_document(document, required_rank, live);
    } catch (const Bad_request& bad) {
        return bad.message;
    } catch (const Json::exception& error) {
        // Not expected (types are checked before each get); kept so no exception escapes.
        return "request body: " + without_prefix(error);
    }
}

}  // namespace eb
