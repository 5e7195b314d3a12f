#include "flags.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include "data_threads.hpp"
#include "mfp.hpp"
#include "tcp_mesh.hpp"
#include "wire_format.hpp"

namespace eb {
namespace {

constexpr std::string_view known_flags[] = {
    "--rank",   "--peers",       "--http-port", "--packing-factor", "--fragment-size", "--events",
    "--size-model", "--rate",   "--source",    "--source-file",    "--output",        "--run",
    "--ring-mib",   "--layout", "--dummies",   "--barrier",        "--barrier-every", "--token-file",
    "--peer-timeout-ms", "--join-timeout-ms", "--incomplete", "--numa-node", "--rdma-device",
    "--transport", "--gid-index", "--output-timeout-ms", "--data-key-file", "--busy-poll-us",
    "--data-threads", "--tcp-streams"};

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
        auto parsed = parse_peer_address(entry);
        if (const auto* error = std::get_if<Peer_address_error>(&parsed))
            return Usage_error{where + (*error == Peer_address_error::bad_port
                                            ? ": the port must be a number in 1..65535"
                                            : ": expected host:port, e.g. eb-0.eb-builder:9000")};
        Peer_address& peer = std::get<Peer_address>(parsed);
        if (const auto same = std::find(peers.begin(), peers.end(), peer); same != peers.end())
            return Usage_error{where + ": same address as entry " + std::to_string(same - peers.begin()) +
                               "; every unit needs its own host:port"};
        peers.push_back(std::move(peer));
        if (comma == list.size()) return std::nullopt;
        begin = comma + 1;
    }
}

// One of `names` (indexed like the enum), e.g. --barrier tournament.
template <class Enum, std::size_t Count>
std::optional<Usage_error> parse_choice(Enum& target, std::string_view flag, std::string_view value,
                                        const std::string_view (&names)[Count]) {
    std::string choices;
    for (std::size_t i = 0; i < Count; ++i) {
        if (value == names[i]) {
            target = static_cast<Enum>(i);
            return std::nullopt;
        }
        choices += (i == 0 ? "" : "|") + std::string(names[i]);
    }
    return Usage_error{std::string(flag) + " " + quoted(value) + ": expected one of " + choices};
}

// "3,7": distinct ranks, kept ascending; range-checked once N is known.
std::optional<Usage_error> parse_dummies(std::string_view list, std::vector<Rank>& dummies) {
    dummies.clear();
    if (list.empty()) return std::nullopt;
    std::size_t begin = 0;
    while (true) {
        const std::size_t comma = std::min(list.find(',', begin), list.size());
        const std::string_view entry = list.substr(begin, comma - begin);
        const auto rank = parse_number(entry, std::numeric_limits<Rank>::max());
        if (!rank) return Usage_error{"--dummies entry " + quoted(entry) + ": expected a rank, e.g. --dummies 3,7"};
        if (std::find(dummies.begin(), dummies.end(), *rank) != dummies.end())
            return Usage_error{"--dummies lists rank " + std::string(entry) + " twice; list each once"};
        dummies.push_back(static_cast<Rank>(*rank));
        if (comma == list.size()) break;
        begin = comma + 1;
    }
    std::sort(dummies.begin(), dummies.end());
    return std::nullopt;
}

constexpr std::string_view size_models[] = {"fixed", "poisson"};
constexpr std::string_view source_kinds[] = {"generator", "shm", "file", "prepared"};
constexpr std::string_view output_kinds[] = {"check", "shm", "discard"};
constexpr std::string_view layouts[] = {"folded", "unfolded"};
constexpr std::string_view barrier_kinds[] = {"none", "centralized", "tournament"};
constexpr std::string_view incomplete_policies[] = {"drop", "flag"};
constexpr std::string_view transport_kinds[] = {"tcp", "verbs"};

// Shared-memory names are /eb-<run>-<rank>-...: keep them short and portable.
std::optional<Usage_error> parse_run_name(std::string_view value, std::string& run_name) {
    const bool portable = !value.empty() && value.size() <= 64 && std::all_of(value.begin(), value.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
    if (!portable)
        return Usage_error{"--run " + quoted(value) + ": expected 1..64 letters, digits, '-' or '_' (it names "
                           "the shared-memory rings)"};
    run_name = value;
    return std::nullopt;
}

std::optional<Usage_error> parse_flag(std::string_view flag, std::string_view value, Config& config,
                                      std::optional<Rank>& rank) {
    if (flag == "--peers") return parse_peers(value, config.peers);
    if (flag == "--rank") return parse_into(rank.emplace(), flag, value, 0);
    if (flag == "--http-port") return parse_into(config.http_port, flag, value, 1);
    if (flag == "--packing-factor") return parse_into(config.packing_factor, flag, value, 1);
    if (flag == "--fragment-size") return parse_into(config.fragment_size, flag, value, 0, max_fragment_bytes);
    if (flag == "--events") return parse_into(config.events, flag, value, 0);
    if (flag == "--size-model") return parse_choice(config.size_model, flag, value, size_models);
    if (flag == "--rate") return parse_into(config.rate, flag, value, 0);
    if (flag == "--source") return parse_choice(config.source, flag, value, source_kinds);
    if (flag == "--source-file") {
        config.source_file = value;
        return std::nullopt;
    }
    if (flag == "--output") return parse_choice(config.output, flag, value, output_kinds);
    if (flag == "--run") return parse_run_name(value, config.run_name);
    if (flag == "--ring-mib") return parse_into(config.ring_mib, flag, value, 1, 1 << 16);
    if (flag == "--layout") return parse_choice(config.layout, flag, value, layouts);
    if (flag == "--dummies") return parse_dummies(value, config.dummies);
    if (flag == "--barrier") return parse_choice(config.barrier, flag, value, barrier_kinds);
    if (flag == "--barrier-every") return parse_into(config.barrier_every, flag, value, 1);
    if (flag == "--token-file") {
        if (value.empty()) return Usage_error{"--token-file needs a path, e.g. /var/run/eventbuilder/control/token"};
        config.token_file = value;
        return std::nullopt;
    }
    if (flag == "--data-key-file") {
        if (value.empty()) return Usage_error{"--data-key-file needs a path, e.g. /var/run/eventbuilder/data/key"};
        config.data_key_file = value;
        return std::nullopt;
    }
    if (flag == "--peer-timeout-ms") return parse_into(config.peer_timeout_ms, flag, value, 100, 600'000);
    if (flag == "--join-timeout-ms") return parse_into(config.join_timeout_ms, flag, value, 100, 600'000);
    if (flag == "--output-timeout-ms") return parse_into(config.output_timeout_ms, flag, value, 1, 600'000);
    if (flag == "--incomplete") return parse_choice(config.incomplete, flag, value, incomplete_policies);
    if (flag == "--busy-poll-us") return parse_into(config.busy_poll_us, flag, value, 0, 10'000);
    if (flag == "--data-threads") return parse_into(config.data_threads, flag, value, 1, Data_threads::max_threads);
    if (flag == "--tcp-streams") return parse_into(config.tcp_streams, flag, value, 1, max_tcp_streams);
    if (flag == "--transport") return parse_choice(config.transport, flag, value, transport_kinds);
    if (flag == "--gid-index") {
        std::uint32_t index = 0;
        if (auto error = parse_into(index, flag, value, 0, 255)) return error;
        config.gid_index = static_cast<int>(index);
        return std::nullopt;
    }
    if (flag == "--numa-node") {
        std::uint32_t node = 0;
        if (auto error = parse_into(node, flag, value, 0, 1023)) return error;
        if (!config.numa.empty()) return Usage_error{"--numa-node and --rdma-device exclude each other; give one"};
        config.numa = value;
        return std::nullopt;
    }
    if (flag == "--rdma-device") {
        if (value.empty() || value.find('/') != std::string_view::npos || value.starts_with("."))
            return Usage_error{"--rdma-device " + quoted(value) + ": expected a device name such as mlx5_0"};
        if (!config.numa.empty()) return Usage_error{"--numa-node and --rdma-device exclude each other; give one"};
        config.numa = value;
        config.rdma_device = value;
        return std::nullopt;
    }
    return Usage_error{"unknown flag " + std::string(flag) + "; see --help for the flags"};
}

// Checks of the run's parameters that need several flags at once: the same
// in both modes, as a controlled builder takes them from its flags too.
std::optional<Usage_error> check_run_parameters(const Config& config) {
    if (config.size_model == Size_model::poisson && config.fragment_size == 0)
        return Usage_error{"--fragment-size 0: --size-model poisson needs a mean of at least 1 byte"};
    if (config.size_model == Size_model::poisson && config.fragment_size > max_poisson_fragment_size)
        return Usage_error{"--fragment-size " + std::to_string(config.fragment_size) +
                           " is too large a mean for --size-model poisson; at most " +
                           std::to_string(max_poisson_fragment_size)};
    if (config.source == Source_kind::prepared && config.output != Output_kind::discard)
        return Usage_error{"--source prepared repeats its first MFPs' payloads, which a checking consumer would count "
                           "incomplete: use it with --output discard (it measures the data mover alone)"};
    if ((config.source == Source_kind::file) != !config.source_file.empty())
        return Usage_error{config.source == Source_kind::file
                               ? "--source file needs --source-file PATH (a file of MFPs, see docs/formats.md)"
                               : "--source-file is only read with --source file; add --source file or drop it"};
    // Poisson sizes stop at mean + 12 sigma (event_model.cpp); the largest
    // mean is that of the SciFi/UT group, source 2.
    const double mean = mean_fragment_size(config.event_model(), 2);
    const auto fragment_bound = static_cast<std::uint32_t>(
        config.size_model == Size_model::fixed ? config.fragment_size
                                               : std::min<double>(max_fragment_bytes, mean + 12 * std::sqrt(mean) + 16));
    if (mfp_bytes(config.packing_factor, fragment_bound) > max_mfp_bytes)
        return Usage_error{"--packing-factor " + std::to_string(config.packing_factor) + " x --fragment-size " +
                           std::to_string(config.fragment_size) + " makes MFPs larger than " +
                           std::to_string(max_mfp_bytes >> 20) + " MiB; lower either"};
    if (config.tcp_streams > 1 && config.transport != Transport_kind::tcp)
        return Usage_error{"--tcp-streams " + std::to_string(config.tcp_streams) +
                           " splits data over TCP connections; with --transport verbs the HCA moves it: drop "
                           "--tcp-streams or use --transport tcp"};
    return std::nullopt;
}

// Checks of the table flags, which only a self-configured builder has.
std::optional<Usage_error> check_table_flags(const Config& config, std::optional<Rank> rank) {
    if (config.peers.empty()) {
        // Controlled: the table comes with configure; table flags make no sense.
        if (!config.dummies.empty())
            return Usage_error{"--dummies needs --peers; a controlled builder gets its dummies with configure"};
        if (config.layout != Layout::folded)
            return Usage_error{"--layout unfolded needs --peers; a controlled builder reads each rank's function (RU, BU or "
                               "RU+BU) from the table configure sends"};
        return std::nullopt;
    }
    if (!rank) return Usage_error{"--rank is required: the 0-based position of this unit in --peers"};
    if (*rank >= config.peers.size())
        return Usage_error{"--rank " + std::to_string(*rank) + " is out of range: --peers lists " +
                           std::to_string(config.peers.size()) + " units, so the rank must be 0.." +
                           std::to_string(config.peers.size() - 1)};
    if (config.http_port == config.peers[*rank].port)
        return Usage_error{"--http-port " + std::to_string(config.http_port) +
                           " is also this unit's data port in --peers; pick another --http-port"};
    if (!config.dummies.empty() && config.dummies.back() >= config.peers.size())
        return Usage_error{"--dummies rank " + std::to_string(config.dummies.back()) + " is out of range: --peers lists " +
                           std::to_string(config.peers.size()) + " ranks"};
    if (std::binary_search(config.dummies.begin(), config.dummies.end(), *rank))
        return Usage_error{"--rank " + std::to_string(*rank) +
                           " is listed in --dummies: a dummy rank runs no process; start only live ranks"};
    const Rank_table table = config.rank_table();
    if (table.rus().empty() || table.bus().empty())
        return Usage_error{"--layout " + std::string(layout_name(config.layout)) + " with --dummies leaves no live " +
                           (table.rus().empty() ? "RU" : "BU") + "; keep at least one of each live"};
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

    if (auto error = check_run_parameters(config)) return *error;
    if (auto error = check_table_flags(config, rank)) return *error;
    config.rank = rank.value_or(0);
    config.rank_given = rank.has_value();
    return config;
}

std::string usage() {
    return R"(Usage: eb-builder [--rank R] [options]                  (controlled)
       eb-builder --rank R --peers HOST:PORT,... [options]  (self-configured)

One event-builder unit: readout unit (RU) and builder unit (BU) folded in one
process. Units exchange MFPs by linear shifting over TCP and assemble MEPs.
Controlled, the unit waits for its rank table from the control API
(docs/control-api.md) and runs until SIGTERM; with --peers it configures and
starts itself. SIGTERM or SIGINT ends the process: self-configured, as
POST /control/stop does (the whole set stops at the end of the current cycle,
this unit alone if the set has not within 500 ms); controlled, this unit
leaves alone and its peers count it lost.

  --rank R               0-based rank of this unit (its position in --peers,
                         or, controlled, the rank configure must name)
  --peers H:P,...        data-plane address of every unit, in rank order; this
                         unit listens on 0.0.0.0:<port of its own entry>
  --http-port P          HTTP control, status and metrics port on 0.0.0.0
                         (default 8080)
  --token-file PATH      bearer token for commands (default: the environment
                         variable EB_CONTROL_TOKEN; none: commands refused)
  --data-key-file PATH   the run's data key (at least 16 bytes): each data
                         connection proves it (HMAC over the peer's nonce and
                         the hello), so no other process can take a rank
                         (default: EB_DATA_KEY; none: unauthenticated)
  --packing-factor F     events per MFP and per MEP (default 1000)
  --fragment-size B      payload bytes per generated fragment (default 128)
  --events E             stop after building E events, rounded up to whole
                         MEPs, and exit (default 0: run until SIGTERM/SIGINT)
  --size-model M         fixed (every fragment --fragment-size bytes) or
                         poisson (three detector groups with 0.28/0.33/0.39 of
                         the event, mean fragment --fragment-size, e.g. 133)
  --rate R               generated events per second per source (default 0:
                         as fast as possible)
  --source S             generator (default), shm (an MFP ring written by
                         another process, e.g. eb-readout-emulator), file, or
                         prepared (MFPs made once and handed out again at no
                         cost, as a readout card's DMA: with --output discard,
                         to measure the data mover alone)
  --source-file PATH     MFPs to replay, with --source file
  --output O             check (default: verify every event in process), shm
                         (a MEP ring for a consumer process, e.g. eb-consumer)
                         or discard (assemble and drop, unchecked: to measure
                         the data mover alone)
  --run NAME             run name in shared-memory names /eb-NAME-RANK-mfp and
                         /eb-NAME-RANK-mep (default eb)
  --ring-mib M           size of the MEP ring this unit creates (default 64)
  --layout L             with --peers: folded (default: RU and BU in every unit)
                         or unfolded (even ranks RU only, odd ranks BU only);
                         controlled, each rank's function comes with configure
  --dummies R,R,...      ranks with no unit: they keep the schedule, move no data
  --barrier B            tournament (default), centralized or none
  --barrier-every K      phases between barriers (default 1)
  --peer-timeout-ms T    a peer whose data goes unacknowledged, or whose
                         process shows no sign of life (heartbeat, data),
                         this long is lost (default 1000)
  --join-timeout-ms T    a rank that joins a running set (a spare made live,
                         a lost rank taken back) and is not connected to every
                         unit this long after the switch is lost (default 5000)
  --incomplete P         drop (default) or flag MEPs missing a lost source
  --output-timeout-ms T  with --output shm: a MEP the ring has no room for
                         within T ms (its consumer is behind) is dropped here
                         and counted, so the set goes on (default 1000)
  --numa-node N          pin threads and memory to NUMA node N (default: the
                         environment variable EB_NUMA_NODE, if set)
  --rdma-device D        pin to the NUMA node of RDMA device D, and move data
                         through it with --transport verbs (default:
                         EB_RDMA_DEVICE, if set and no node is given)
  --transport T          tcp (default) or verbs (RDMA: libibverbs RC queue
                         pairs, set up over the TCP connections to the peers)
  --gid-index N          verbs over RoCE: the GID index to use (default: a
                         RoCE v2 GID with an IPv4 address, picked)
  --busy-poll-us U       a unit waiting for data looks again for U
                         microseconds, yielding the core between looks,
                         before it sleeps (default 300; 0: sleep at once)
  --data-threads K       threads moving a unit's data over TCP, its phase's
                         send and receive on two at once; at most the CPUs
                         it may run on (default: those CPUs, at most 2)
  --tcp-streams S        TCP connections per peer and direction; a data
                         message of 4 KiB or more per stream goes in S
                         slices, copied on up to 2S threads at once (one
                         stream moves what one core copies); every unit of a
                         set needs the same S (default 1, at most 16)
  --help                 show this text

Endpoints: POST /control/{configure,start,pause,resume,stop,reset}; GET
/status (JSON), /metrics (Prometheus), /healthz, /readyz.
Exit codes: 0 done or stopped by signal, 1 startup failure, 2 bad usage.
)";
}

}  // namespace eb
