#include "app/flags.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <variant>

#include <nlohmann/json.hpp>

#include "base/data_threads.hpp"
#include "formats/mfp.hpp"
#include "transport/injected_fault.hpp"
#include "transport/tcp/tcp_mesh.hpp"
#include "formats/wire_format.hpp"

namespace eb {
namespace {

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

// Whole numbers into a Config field, in the flag's range.
template <auto Field>
std::optional<Usage_error> number(const Flag_spec& spec, std::string_view value, Flag_state& state) {
    return parse_into(state.config.*Field, spec.name, value, spec.min, spec.max);
}

template <auto Field>
std::string show_number(const Config& config) {
    return std::to_string(config.*Field);
}

// One of the flag's choices (indexed like the enum), e.g. --barrier tournament.
template <auto Field>
std::optional<Usage_error> choice(const Flag_spec& spec, std::string_view value, Flag_state& state) {
    std::string choices;
    for (std::size_t i = 0; i < spec.choices.size(); ++i) {
        if (value == spec.choices[i]) {
            state.config.*Field = static_cast<std::remove_reference_t<decltype(state.config.*Field)>>(i);
            return std::nullopt;
        }
        choices += (i == 0 ? "" : "|") + std::string(spec.choices[i]);
    }
    return Usage_error{std::string(spec.name) + " " + quoted(value) + ": expected one of " + choices};
}

template <auto Field, const auto& Names>
std::string show_choice(const Config& config) {
    return std::string(Names[static_cast<std::size_t>(config.*Field)]);
}

// A path, which must not be empty: `example` shows one.
template <auto Field, const std::string_view& Example>
std::optional<Usage_error> path(const Flag_spec& spec, std::string_view value, Flag_state& state) {
    if (value.empty()) return Usage_error{std::string(spec.name) + " needs a path, e.g. " + std::string(Example)};
    state.config.*Field = value;
    return std::nullopt;
}

constexpr std::string_view token_example = "/var/run/eventbuilder/control/token";
constexpr std::string_view key_example = "/var/run/eventbuilder/data/key";
constexpr std::string_view source_file_example = "/data/run-255003.mfp";

std::optional<Usage_error> rank_flag(const Flag_spec& spec, std::string_view value, Flag_state& state) {
    return parse_into(state.rank.emplace(), spec.name, value, spec.min, spec.max);
}

std::optional<Usage_error> peers_flag(const Flag_spec&, std::string_view value, Flag_state& state) {
    return parse_peers(value, state.config.peers);
}

std::optional<Usage_error> dummies_flag(const Flag_spec&, std::string_view value, Flag_state& state) {
    return parse_dummies(value, state.config.dummies);
}

std::optional<Usage_error> run_flag(const Flag_spec&, std::string_view value, Flag_state& state) {
    return parse_run_name(value, state.config.run_name);
}

std::optional<Usage_error> gid_index_flag(const Flag_spec& spec, std::string_view value, Flag_state& state) {
    std::uint32_t index = 0;
    if (auto error = parse_into(index, spec.name, value, spec.min, spec.max)) return error;
    state.config.gid_index = static_cast<int>(index);
    return std::nullopt;
}

std::optional<Usage_error> inject_fault_flag(const Flag_spec&, std::string_view value, Flag_state& state) {
    auto parsed = parse_injected_fault(value);
    if (auto* error = std::get_if<std::string>(&parsed)) return Usage_error{*error};
    state.config.fault = std::get<Injected_fault>(parsed);
    return std::nullopt;
}

// --numa-node and --rdma-device both say where to pin.
std::optional<Usage_error> numa_node_flag(const Flag_spec& spec, std::string_view value, Flag_state& state) {
    std::uint32_t node = 0;
    if (auto error = parse_into(node, spec.name, value, spec.min, spec.max)) return error;
    if (!state.config.numa.empty()) return Usage_error{"--numa-node and --rdma-device exclude each other; give one"};
    state.config.numa = value;
    return std::nullopt;
}

std::optional<Usage_error> rdma_device_flag(const Flag_spec& spec, std::string_view value, Flag_state& state) {
    if (value.empty() || value.find('/') != std::string_view::npos || value.starts_with("."))
        return Usage_error{std::string(spec.name) + " " + quoted(value) + ": expected a device name such as mlx5_0"};
    if (!state.config.numa.empty()) return Usage_error{"--numa-node and --rdma-device exclude each other; give one"};
    state.config.numa = value;
    state.config.rdma_device = value;
    return std::nullopt;
}

constexpr std::uint64_t u16_max = std::numeric_limits<std::uint16_t>::max();
constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

// In --help's order.
const Flag_spec flags[] = {
    {.name = "--rank", .value_name = "R",
     .help = "0-based rank of this unit (its position in --peers, or, controlled, the rank configure must name)",
     .max = u32_max, .parse = rank_flag},
    {.name = "--peers", .value_name = "H:P,...",
     .help = "data-plane address of every unit, in rank order; this unit listens on 0.0.0.0:<port of its own entry>",
     .parse = peers_flag},
    {.name = "--http-port", .value_name = "P", .help = "HTTP control, status and metrics port on 0.0.0.0",
     .fallback = "8080", .min = 1, .max = u16_max, .parse = number<&Config::http_port>,
     .show = show_number<&Config::http_port>},
    {.name = "--token-file", .value_name = "PATH", .help = "bearer token for commands (none: commands refused)",
     .environment = "EB_CONTROL_TOKEN", .parse = path<&Config::token_file, token_example>},
    {.name = "--data-key-file", .value_name = "PATH",
     .help = "the run's data key (at least 16 bytes): each data connection proves it (HMAC over the peer's nonce "
             "and the hello), so no other process can take a rank (none: unauthenticated)",
     .environment = "EB_DATA_KEY", .parse = path<&Config::data_key_file, key_example>},
    {.name = "--packing-factor", .value_name = "F", .help = "events per MFP and per MEP; must match on every unit",
     .fallback = "1000", .min = 1, .max = u32_max, .parse = number<&Config::packing_factor>,
     .show = show_number<&Config::packing_factor>},
    {.name = "--fragment-size", .value_name = "B", .help = "payload bytes per generated fragment",
     .fallback = "128", .max = max_fragment_bytes, .parse = number<&Config::fragment_size>,
     .show = show_number<&Config::fragment_size>},
    {.name = "--events", .value_name = "E",
     .help = "stop after building E events, rounded up to whole MEPs, and exit (0: run until SIGTERM/SIGINT)",
     .fallback = "0", .max = u64_max, .parse = number<&Config::events>, .show = show_number<&Config::events>},
    {.name = "--size-model", .value_name = "M",
     .help = "fixed (every fragment --fragment-size bytes) or poisson (three detector groups with 0.28/0.33/0.39 of "
             "the event, mean fragment --fragment-size, e.g. 133)",
     .fallback = "fixed", .choices = size_models, .parse = choice<&Config::size_model>,
     .show = show_choice<&Config::size_model, size_models>},
    {.name = "--rate", .value_name = "R", .help = "generated events per second per source (0: as fast as possible)",
     .fallback = "0", .max = u64_max, .parse = number<&Config::rate>, .show = show_number<&Config::rate>},
    {.name = "--source", .value_name = "S",
     .help = "generator, shm (an MFP ring written by another process, e.g. eb-readout-emulator), file, or prepared "
             "(MFPs made once and handed out again at no cost, as a readout card's DMA: with --output discard, to "
             "measure the data mover alone)",
     .fallback = "generator", .choices = source_kinds, .parse = choice<&Config::source>,
     .show = show_choice<&Config::source, source_kinds>},
    {.name = "--source-file", .value_name = "PATH", .help = "MFPs to replay, with --source file",
     .parse = path<&Config::source_file, source_file_example>},
    {.name = "--output", .value_name = "O",
     .help = "check (verify every event in process), shm (a MEP ring for a consumer process, e.g. eb-consumer) or "
             "discard (assemble and drop, unchecked: to measure the data mover alone)",
     .fallback = "check", .choices = output_kinds, .parse = choice<&Config::output>,
     .show = show_choice<&Config::output, output_kinds>},
    {.name = "--run", .value_name = "NAME",
     .help = "run name in shared-memory names /eb-NAME-RANK-mfp and /eb-NAME-RANK-mep (1..64 letters, digits, '-' "
             "or '_')",
     .fallback = "eb", .parse = run_flag, .show = [](const Config& config) { return config.run_name; }},
    {.name = "--ring-mib", .value_name = "M", .help = "size of the MEP ring this unit creates, in MiB",
     .fallback = "64", .min = 1, .max = 1 << 16, .parse = number<&Config::ring_mib>,
     .show = show_number<&Config::ring_mib>},
    {.name = "--layout", .value_name = "L",
     .help = "with --peers: folded (RU and BU in every unit) or unfolded (even ranks RU only, odd ranks BU only); "
             "controlled, each rank's function comes with configure",
     .fallback = "folded", .choices = layouts, .parse = choice<&Config::layout>,
     .show = show_choice<&Config::layout, layouts>},
    {.name = "--dummies", .value_name = "R,R,...",
     .help = "ranks with no unit: they keep the schedule, move no data", .parse = dummies_flag},
    {.name = "--barrier", .value_name = "B", .help = "tournament, centralized or none",
     .fallback = "tournament", .choices = barrier_kinds, .parse = choice<&Config::barrier>,
     .show = show_choice<&Config::barrier, barrier_kinds>},
    {.name = "--barrier-every", .value_name = "K", .help = "phases between barriers", .fallback = "1", .min = 1,
     .max = u32_max, .parse = number<&Config::barrier_every>, .show = show_number<&Config::barrier_every>},
    {.name = "--peer-timeout-ms", .value_name = "T",
     .help = "a peer whose data goes unacknowledged, or whose process shows no sign of life (heartbeat, data), this "
             "long is lost",
     .fallback = "1000", .min = 100, .max = 600'000, .parse = number<&Config::peer_timeout_ms>,
     .show = show_number<&Config::peer_timeout_ms>},
    {.name = "--join-timeout-ms", .value_name = "T",
     .help = "a rank that joins a running set (a spare made live, a lost rank taken back) and is not connected to "
             "every unit this long after the switch is lost",
     .fallback = "5000", .min = 100, .max = 600'000, .parse = number<&Config::join_timeout_ms>,
     .show = show_number<&Config::join_timeout_ms>},
    {.name = "--incomplete", .value_name = "P", .help = "drop or flag MEPs missing a lost source",
     .fallback = "drop", .choices = incomplete_policies, .parse = choice<&Config::incomplete>,
     .show = show_choice<&Config::incomplete, incomplete_policies>},
    {.name = "--output-timeout-ms", .value_name = "T",
     .help = "with --output shm: a MEP the ring has no room for within T ms (its consumer is behind) is dropped here "
             "and counted, so the set goes on",
     .fallback = "1000", .min = 1, .max = 600'000, .parse = number<&Config::output_timeout_ms>,
     .show = show_number<&Config::output_timeout_ms>},
    {.name = "--numa-node", .value_name = "N", .help = "pin threads and memory to NUMA node N",
     .environment = "EB_NUMA_NODE", .max = 1023, .parse = numa_node_flag},
    {.name = "--rdma-device", .value_name = "D",
     .help = "pin to the NUMA node of RDMA device D, and move data through it with --transport verbs (the "
             "variable is read if no node is given either)",
     .environment = "EB_RDMA_DEVICE", .parse = rdma_device_flag},
    {.name = "--transport", .value_name = "T",
     .help = "tcp or verbs (RDMA: libibverbs RC queue pairs, set up over the TCP connections to the peers)",
     .fallback = "tcp", .choices = transport_kinds, .parse = choice<&Config::transport>,
     .show = show_choice<&Config::transport, transport_kinds>},
    {.name = "--gid-index", .value_name = "N",
     .help = "verbs over RoCE: the GID index to use (default: a RoCE v2 GID with an IPv4 address, picked)",
     .max = 255, .parse = gid_index_flag},
    {.name = "--busy-poll-us", .value_name = "U",
     .help = "a unit waiting for data looks again for U microseconds, yielding the core between looks, before it "
             "sleeps (0: sleep at once)",
     .fallback = "300", .max = 10'000, .parse = number<&Config::busy_poll_us>,
     .show = show_number<&Config::busy_poll_us>},
    {.name = "--data-threads", .value_name = "K",
     .help = "threads moving a unit's data over TCP, its phase's send and receive on two at once; at most the CPUs "
             "it may run on (default: those CPUs, at most 2)",
     .min = 1, .max = Data_threads::max_threads, .parse = number<&Config::data_threads>},
    {.name = "--tcp-streams", .value_name = "S",
     .help = "TCP connections per peer and direction; a data message of 4 KiB or more per stream goes in S slices, "
             "copied on up to 2S threads at once (one stream moves what one core copies); every unit of a set needs "
             "the same S",
     .fallback = "1", .min = 1, .max = max_tcp_streams, .parse = number<&Config::tcp_streams>,
     .show = show_number<&Config::tcp_streams>},
    {.name = "--verbs-depth", .value_name = "D",
     .help = "cycles whose MFP receives a BU holds posted: 2 announces each MFP's size a cycle ahead and posts the "
             "next cycle's receives as soon as the set has decided to go on, so over verbs an MFP finds its receive "
             "and credit ready; 1 posts them after the cycle's headers (over TCP always 1: data moves there only "
             "when waited for)",
     .fallback = "2", .min = 1, .max = 2, .parse = number<&Config::verbs_depth>,
     .show = show_number<&Config::verbs_depth>},
    {.name = "--receive-window", .value_name = "W",
     .help = "over verbs, the phases ahead a BU posts its MFP receives, each with its credit, so an RU sends only "
             "within W phases of its BU (0: a cycle's at once). Without a barrier, units whose MFPs differ in size "
             "drift apart, and a BU open to a whole cycle takes two MFPs at once on its link: on a fat tree of 163 "
             "servers 1 builds about twice what 0 does (builder/sim/README.md); each phase then waits for a credit",
     .fallback = "0", .max = 1'000'000, .parse = number<&Config::receive_window>,
     .show = show_number<&Config::receive_window>},
    {.name = "--inject-fault", .value_name = "F",
     .help = "tests and qualification only: with --transport verbs, qp-error:R:N moves the data queue pair with "
             "rank R to the error state once the N-th data receive from R is posted; short-mfp:R:N sends the N-th "
             "MFP to R 8 bytes short of its announced size (docs/verbs.md, \"Losing a peer\")",
     .parse = inject_fault_flag},
};

const Flag_spec* find_flag(std::string_view name) {
    for (const Flag_spec& flag : flags)
        if (flag.name == name) return &flag;
    return nullptr;
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
    if (config.receive_window != 0 && config.transport != Transport_kind::verbs)
        return Usage_error{"--receive-window " + std::to_string(config.receive_window) +
                           " paces the verbs transport's receives and credits; over TCP data moves only when waited "
                           "for: add --transport verbs or drop it"};
    if (config.fault && config.transport != Transport_kind::verbs)
        return Usage_error{"--inject-fault " + injected_fault_text(*config.fault) +
                           " acts on the verbs transport's queue pairs: add --transport verbs or drop it"};
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
    Flag_state state;
    std::vector<std::string_view> seen;

    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string_view arg = args[i];
        if (arg == "--help" || arg == "-h") return Show_help{};
        if (arg == "--describe-flags") return Describe_flags{};
        if (!arg.starts_with("--"))
            return Usage_error{"unexpected argument " + quoted(arg) + "; flags look like --rank 0"};

        std::string_view name = arg;
        std::optional<std::string_view> value;
        if (const std::size_t equals = arg.find('='); equals != std::string_view::npos) {
            name = arg.substr(0, equals);
            value = arg.substr(equals + 1);
        }
        // Checked before taking a value, so "--verbose" is reported as unknown.
        const Flag_spec* flag = find_flag(name);
        if (flag == nullptr) return Usage_error{"unknown flag " + std::string(name) + "; see --help for the flags"};
        if (std::find(seen.begin(), seen.end(), name) != seen.end())
            return Usage_error{std::string(name) + " is given twice; give it once"};
        seen.push_back(name);
        if (!value) {
            if (i + 1 == args.size()) return Usage_error{std::string(name) + " needs a value; see --help"};
            value = args[++i];
        }
        if (auto error = flag->parse(*flag, *value, state)) return *error;
    }

    Config& config = state.config;
    if (auto error = check_run_parameters(config)) return *error;
    if (auto error = check_table_flags(config, state.rank)) return *error;
    config.rank = state.rank.value_or(0);
    config.rank_given = state.rank.has_value();
    return config;
}

std::span<const Flag_spec> flag_table() { return flags; }

namespace {

// `text` after `indent` spaces, wrapped at 79 columns; the first line
// continues what is already on it (`column` characters).
std::string wrapped(std::string_view text, std::size_t indent, std::size_t column) {
    constexpr std::size_t width = 79;
    std::string out;
    std::size_t begin = 0;
    while (begin < text.size()) {
        std::size_t end = std::min(text.find(' ', begin), text.size());
        const std::size_t word = end - begin;
        if (column > indent && column + 1 + word > width) {
            out += "\n" + std::string(indent, ' ');
            column = indent;
        } else if (column > indent) {
            out += ' ';
            ++column;
        }
        out += text.substr(begin, word);
        column += word;
        begin = end + 1;
    }
    return out;
}

std::string help_of(const Flag_spec& flag) {
    std::string help(flag.help);
    if (!flag.fallback.empty()) help += " (default " + std::string(flag.fallback) + ")";
    else if (!flag.environment.empty()) help += " (default: $" + std::string(flag.environment) + ", if set)";
    return help;
}

}  // namespace

std::string usage() {
    std::string text = R"(Usage: eb-builder [--rank R] [options]                  (controlled)
       eb-builder --rank R --peers HOST:PORT,... [options]  (self-configured)

One event-builder unit: readout unit (RU) and builder unit (BU) folded in one
process. Units exchange MFPs by linear shifting over TCP and assemble MEPs.
Controlled, the unit waits for its rank table from the control API
(docs/control-api.md) and runs until SIGTERM; with --peers it configures and
starts itself. SIGTERM or SIGINT ends the process: self-configured, as
POST /control/stop does (the whole set stops at the end of the current cycle,
this unit alone if the set has not within 500 ms); controlled, this unit
leaves alone and its peers count it lost.

)";
    constexpr std::size_t help_column = 25;
    for (const Flag_spec& flag : flags) {
        std::string left = "  " + std::string(flag.name) + " " + std::string(flag.value_name);
        if (left.size() + 2 > help_column) left += "\n" + std::string(help_column, ' ');
        else left.resize(help_column, ' ');
        text += left + wrapped(help_of(flag), help_column, help_column) + "\n";
    }
    text += R"(  --describe-flags       print this table of flags as JSON and exit
  --help                 show this text

Endpoints: POST /control/{configure,start,pause,resume,stop,reset}; GET
/status (JSON), /metrics (Prometheus), /healthz, /readyz.
Exit codes: 0 done or stopped by signal, 1 startup failure, 2 bad usage.
)";
    return text;
}

std::string describe_flags() {
    nlohmann::json described = nlohmann::json::array();
    for (const Flag_spec& flag : flags) {
        nlohmann::json entry = {{"name", flag.name},
                                {"value_name", flag.value_name},
                                {"help", flag.help},
                                {"default", flag.fallback},
                                {"environment", flag.environment}};
        if (flag.min != 0 || flag.max != 0) {
            entry["min"] = flag.min;
            entry["max"] = flag.max;
        }
        if (!flag.choices.empty()) entry["choices"] = std::vector<std::string>(flag.choices.begin(), flag.choices.end());
        described.push_back(std::move(entry));
    }
    return nlohmann::json{{"flags", std::move(described)}}.dump(2) + "\n";
}

}  // namespace eb
