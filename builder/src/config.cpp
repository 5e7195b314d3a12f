#include "config.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "mfp.hpp"
#include "wire_format.hpp"

namespace eb {
namespace {

constexpr std::string_view known_flags[] = {"--rank",           "--peers",         "--http-port",
                                            "--packing-factor", "--fragment-size", "--events"};

std::optional<std::uint64_t> parse_number(std::string_view text, std::uint64_t max) {
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc{} || end != text.data() + text.size() || value > max)
        return std::nullopt;
    return value;
}

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

// Parses a whole number in min..max into `target`.
template <class T>
std::optional<Usage_error> parse_into(T& target, std::string_view flag, std::string_view value,
                                      std::uint64_t min, std::uint64_t max = std::numeric_limits<T>::max()) {
    const auto parsed = parse_number(value, max);
    if (!parsed || *parsed < min)
        return Usage_error{std::string(flag) + " " + quoted(value) + ": expected a whole number in " +
                           std::to_string(min) + ".." + std::to_string(max)};
    target = static_cast<T>(*parsed);
    return std::nullopt;
}

// "host:port,host:port,..."; the port follows the last colon.
std::optional<Usage_error> parse_peers(std::string_view list, std::vector<Peer_address>& peers) {
    peers.clear();
    std::size_t begin = 0;
    while (true) {
        const std::size_t comma = std::min(list.find(',', begin), list.size());
        const std::string_view entry = list.substr(begin, comma - begin);
        const std::string where = "--peers entry " + std::to_string(peers.size()) + " " + quoted(entry);
        const std::size_t colon = entry.rfind(':');
        if (colon == std::string_view::npos || colon == 0)
            return Usage_error{where + ": expected host:port, e.g. eb-0.eb-builder:9000"};
        const auto port = parse_number(entry.substr(colon + 1), std::numeric_limits<std::uint16_t>::max());
        if (!port || *port == 0) return Usage_error{where + ": the port must be a number in 1..65535"};
        Peer_address peer{std::string(entry.substr(0, colon)), static_cast<std::uint16_t>(*port)};
        if (const auto same = std::find(peers.begin(), peers.end(), peer); same != peers.end())
            return Usage_error{where + ": same address as entry " + std::to_string(same - peers.begin()) +
                               "; every unit needs its own host:port"};
        peers.push_back(std::move(peer));
        if (comma == list.size()) return std::nullopt;
        begin = comma + 1;
    }
}

std::optional<Usage_error> parse_flag(std::string_view flag, std::string_view value, Config& config,
                                      std::optional<Rank>& rank) {
    if (flag == "--peers") return parse_peers(value, config.peers);
    if (flag == "--rank") return parse_into(rank.emplace(), flag, value, 0);
    if (flag == "--http-port") return parse_into(config.http_port, flag, value, 1);
    if (flag == "--packing-factor") return parse_into(config.packing_factor, flag, value, 1);
    if (flag == "--fragment-size") return parse_into(config.fragment_size, flag, value, 0);
    if (flag == "--events") return parse_into(config.events, flag, value, 0);
    return Usage_error{"unknown flag " + std::string(flag) + "; see --help for the flags"};
}

// Checks that need several flags at once.
std::optional<Usage_error> check_consistency(const Config& config, std::optional<Rank> rank) {
    if (config.peers.empty())
        return Usage_error{"--peers is required: list every unit's data address in rank order, "
                           "e.g. --peers eb-0.eb-builder:9000,eb-1.eb-builder:9000"};
    if (!rank) return Usage_error{"--rank is required: the 0-based position of this unit in --peers"};
    if (*rank >= config.peers.size())
        return Usage_error{"--rank " + std::to_string(*rank) + " is out of range: --peers lists " +
                           std::to_string(config.peers.size()) + " units, so the rank must be 0.." +
                           std::to_string(config.peers.size() - 1)};
    if (config.http_port == config.peers[*rank].port)
        return Usage_error{"--http-port " + std::to_string(config.http_port) +
                           " is also this unit's data port in --peers; pick another --http-port"};
    if (mfp_bytes(config.packing_factor, config.fragment_size) > max_mfp_bytes)
        return Usage_error{"--packing-factor " + std::to_string(config.packing_factor) + " x --fragment-size " +
                           std::to_string(config.fragment_size) + " makes MFPs larger than " +
                           std::to_string(max_mfp_bytes >> 20) + " MiB; lower either"};
    return std::nullopt;
}

}  // namespace

Command_line parse_command_line(std::span<const std::string_view> args) {
    Config config;
    std::optional<Rank> rank;
    std::vector<std::string_view> seen;

    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string_view arg = args[i];
        if (arg == "--help" || arg == "-h") return Show_help{};
        if (!arg.starts_with("--"))
            return Usage_error{"unexpected argument " + quoted(arg) + "; flags look like --rank 0"};

        std::string_view flag = arg;
        std::optional<std::string_view> value;
        if (const std::size_t equals = arg.find('='); equals != std::string_view::npos) {
            flag = arg.substr(0, equals);
            value = arg.substr(equals + 1);
        }
        // Checked before taking a value, so "--verbose" is reported as unknown.
        if (std::find(std::begin(known_flags), std::end(known_flags), flag) == std::end(known_flags))
            return Usage_error{"unknown flag " + std::string(flag) + "; see --help for the flags"};
        if (std::find(seen.begin(), seen.end(), flag) != seen.end())
            return Usage_error{std::string(flag) + " is given twice; give it once"};
        seen.push_back(flag);
        if (!value) {
            if (i + 1 == args.size()) return Usage_error{std::string(flag) + " needs a value; see --help"};
            value = args[++i];
        }
        if (auto error = parse_flag(flag, *value, config, rank)) return *error;
    }

    if (auto error = check_consistency(config, rank)) return *error;
    config.rank = *rank;
    return config;
}

std::string usage() {
    return R"(Usage: eb-builder --rank R --peers HOST:PORT,HOST:PORT,... [options]

One event-builder unit: readout unit (RU) and builder unit (BU) folded in one
process. Units exchange MFPs by linear shifting over TCP and assemble MEPs.

  --rank R               0-based rank of this unit (its position in --peers)
  --peers H:P,...        data-plane address of every unit, in rank order; this
                         unit listens on 0.0.0.0:<port of its own entry>
  --http-port P          HTTP status port on 0.0.0.0 (default 8080)
  --packing-factor F     events per MFP and per MEP (default 1000)
  --fragment-size B      payload bytes per generated fragment (default 128)
  --events E             stop after building E events, rounded up to whole
                         MEPs, and exit (default 0: run until SIGTERM/SIGINT)
  --help                 show this text

Endpoints: GET /status (JSON), /metrics (Prometheus), /healthz.
Exit codes: 0 done or stopped by signal, 1 startup failure, 2 bad usage.
)";
}

}  // namespace eb
