#include "app/flags.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "app/data_thread_count.hpp"
#include "test_support.hpp"

namespace eb {
namespace {

Command_line parse(std::vector<std::string_view> args) { return parse_command_line(args); }

TEST(Config, AcceptsValidCommandLines) {
    // The flags the operator passes today.
    struct Expected {
        Rank rank;
        std::vector<Peer_address> peers;
        std::uint16_t http_port;
        std::uint32_t packing_factor, fragment_size;
        std::uint64_t events;
    };
    struct Case {
        std::vector<std::string_view> args;
        Expected expected;
    };
    const Case cases[] = {
        {{"--rank", "0", "--peers", "eb-0.eb:9000"}, {0, {{"eb-0.eb", 9000}}, 8080, 1000, 128, 0}},
        {{"--peers", "a:1,b:2,c:3", "--rank", "2", "--http-port", "9090", "--packing-factor", "30000",
          "--fragment-size", "130", "--events", "1000000"},
         {2, {{"a", 1}, {"b", 2}, {"c", 3}}, 9090, 30000, 130, 1000000}},
        {{"--rank=1", "--peers=10.0.0.1:9000,10.0.0.2:9000", "--events=5"},
         {1, {{"10.0.0.1", 9000}, {"10.0.0.2", 9000}}, 8080, 1000, 128, 5}},
        {{"--rank", "0", "--peers", "a:1", "--fragment-size", "0"}, {0, {{"a", 1}}, 8080, 1000, 0, 0}},
    };
    for (const auto& c : cases) {
        const Command_line parsed = parse(c.args);
        const auto* config = std::get_if<Config>(&parsed);
        ASSERT_NE(config, nullptr) << std::get<Usage_error>(parsed).message;
        EXPECT_EQ(config->rank, c.expected.rank);
        EXPECT_EQ(config->peers, c.expected.peers);
        EXPECT_EQ(config->http_port, c.expected.http_port);
        EXPECT_EQ(config->packing_factor, c.expected.packing_factor);
        EXPECT_EQ(config->fragment_size, c.expected.fragment_size);
        EXPECT_EQ(config->events, c.expected.events);
    }
}

TEST(Config, DataPlaneFlags) {
    const Command_line parsed =
        parse({"--rank", "1", "--peers", "a:1,b:2,c:3,d:4", "--size-model", "poisson", "--fragment-size", "133",
               "--rate", "1000000", "--source", "shm", "--output", "shm", "--run", "run-7", "--ring-mib", "32",
               "--layout", "unfolded", "--dummies", "2", "--barrier", "centralized", "--barrier-every", "4"});
    const auto* config = std::get_if<Config>(&parsed);
    ASSERT_NE(config, nullptr) << std::get<Usage_error>(parsed).message;
    EXPECT_EQ(config->size_model, Size_model::poisson);
    EXPECT_EQ(config->rate, 1000000u);
    EXPECT_EQ(config->source, Source_kind::shm);
    EXPECT_EQ(config->output, Output_kind::shm);
    EXPECT_EQ(config->run_name, "run-7");
    EXPECT_EQ(config->ring_mib, 32u);
    EXPECT_EQ(config->layout, Layout::unfolded);
    EXPECT_EQ(config->dummies, std::vector<Rank>{2});
    EXPECT_EQ(config->barrier, Barrier_kind::centralized);
    EXPECT_EQ(config->barrier_every, 4u);

    const Command_line defaults = parse({"--rank", "0", "--peers", "a:1"});
    ASSERT_TRUE(std::holds_alternative<Config>(defaults));
    EXPECT_EQ(std::get<Config>(defaults).barrier, Barrier_kind::tournament);
    EXPECT_EQ(std::get<Config>(defaults).layout, Layout::folded);
    EXPECT_EQ(std::get<Config>(defaults).source, Source_kind::generator);
    EXPECT_EQ(std::get<Config>(defaults).verbs_depth, 2u) << "receives go a cycle ahead unless asked not to";
    EXPECT_FALSE(std::get<Config>(defaults).receives_ahead()) << "over TCP data moves only when waited for";
    const Command_line verbs = parse({"--rank", "0", "--peers", "a:1", "--transport", "verbs"});
    ASSERT_TRUE(std::holds_alternative<Config>(verbs));
    EXPECT_TRUE(std::get<Config>(verbs).receives_ahead());
    EXPECT_EQ(std::get<Config>(verbs).cycles_held(), 2u) << "the RU's source holds the next cycle's MFPs too";
}

// Without --peers the process is controlled: it waits for its rank table
// from POST /control/configure (docs/control-api.md), so that is no error.
TEST(Config, WithoutPeersTheProcessIsControlled) {
    const Command_line bare = parse({});
    const auto* config = std::get_if<Config>(&bare);
    ASSERT_NE(config, nullptr) << std::get<Usage_error>(bare).message;
    EXPECT_FALSE(config->self_configured());
    EXPECT_FALSE(config->rank_given);
    EXPECT_TRUE(config->peers.empty());

    // --rank pins the rank configure must name; other flags still apply.
    const Command_line ranked =
        parse({"--rank", "3", "--http-port", "9090", "--token-file", "/run/token", "--peer-timeout-ms", "2500",
               "--join-timeout-ms", "800", "--incomplete", "flag", "--busy-poll-us", "0", "--data-threads", "3",
               "--tcp-streams", "4", "--verbs-depth", "1"});
    const auto* pinned = std::get_if<Config>(&ranked);
    ASSERT_NE(pinned, nullptr) << std::get<Usage_error>(ranked).message;
    EXPECT_FALSE(pinned->self_configured());
    EXPECT_TRUE(pinned->rank_given);
    EXPECT_EQ(pinned->rank, 3u);
    EXPECT_EQ(pinned->http_port, 9090);
    EXPECT_EQ(pinned->token_file, "/run/token");
    EXPECT_EQ(pinned->peer_timeout_ms, 2500u);
    EXPECT_EQ(pinned->join_timeout_ms, 800u);
    EXPECT_EQ(pinned->incomplete, Incomplete_policy::flag);
    EXPECT_EQ(pinned->busy_poll_us, 0u);
    EXPECT_EQ(pinned->transport_settings().busy_poll_us, 0u) << "the transport is made with it";
    EXPECT_EQ(pinned->data_threads, 3u);
    EXPECT_EQ(pinned->tcp_streams, 4u);
    EXPECT_EQ(pinned->verbs_depth, 1u);
    EXPECT_FALSE(pinned->fault) << "no fault unless asked for";
    EXPECT_EQ(pinned->receive_window, 0u) << "a cycle's receives at once unless asked";

    const Command_line windowed = parse({"--transport", "verbs", "--receive-window", "1"});
    ASSERT_NE(std::get_if<Config>(&windowed), nullptr) << std::get<Usage_error>(windowed).message;
    EXPECT_EQ(std::get<Config>(windowed).receive_window, 1u);

    const Command_line faulty = parse({"--transport", "verbs", "--inject-fault", "short-mfp:2:17"});
    const auto* injecting = std::get_if<Config>(&faulty);
    ASSERT_NE(injecting, nullptr) << std::get<Usage_error>(faulty).message;
    ASSERT_TRUE(injecting->transport_settings().fault) << "the transport is made with it";
    EXPECT_EQ(injecting->fault->kind, Injected_fault::Kind::short_mfp);
    EXPECT_EQ(injecting->fault->peer, 2u);
    EXPECT_EQ(injecting->fault->after, 17u);
    EXPECT_EQ(injected_fault_text(*injecting->fault), "short-mfp:2:17");

    const Command_line self = parse({"--rank", "0", "--peers", "a:1"});
    ASSERT_TRUE(std::holds_alternative<Config>(self));
    EXPECT_TRUE(std::get<Config>(self).self_configured());
    EXPECT_EQ(std::get<Config>(self).peer_timeout_ms, 1000u) << "the default --peer-timeout-ms";
    EXPECT_EQ(std::get<Config>(self).join_timeout_ms, 5000u) << "the default --join-timeout-ms";
    EXPECT_EQ(std::get<Config>(self).incomplete, Incomplete_policy::drop) << "the default --incomplete";
    EXPECT_EQ(std::get<Config>(self).busy_poll_us, 300u) << "the default --busy-poll-us";
    EXPECT_EQ(std::get<Config>(self).data_threads, 0u) << "unset: chosen at start from the CPUs";
    EXPECT_EQ(std::get<Config>(self).tcp_streams, 1u) << "the default --tcp-streams";
}

TEST(Config, DataThreadsDefaultToTheCpusAtMostTwoAndMoreThanTheCpusAreRefused) {
    struct Case {
        std::uint32_t requested;
        unsigned cpus;
        std::variant<unsigned, std::string> chosen;
    };
    const Case cases[] = {
        {0, 1, 1u},
        {0, 2, 2u},
        {0, 64, default_data_threads_cap},
        {0, 0, 1u},  // no affinity read: one
        {1, 16, 1u},
        {8, 16, 8u},
        {16, 16, 16u},
        {3, 2,
         "--data-threads 3: this unit may run on 2 CPUs (its cpuset, on its NUMA node when pinned), and more threads "
         "would take turns on them; give at most 2, or more CPUs (spec.resources.cpus)"},
        {2, 1,
         "--data-threads 2: this unit may run on 1 CPU (its cpuset, on its NUMA node when pinned), and more threads "
         "would take turns on them; give at most 1, or more CPUs (spec.resources.cpus)"},
    };
    for (const Case& c : cases)
        EXPECT_EQ(choose_data_threads(c.requested, c.cpus), c.chosen) << c.requested << " on " << c.cpus << " CPUs";
}

// A container's CPU limit counts: where the kubelet does not pin, the cpuset
// is the whole node and only the limit says how many CPUs the unit has.
TEST(Config, TheCpusAUnitMayUseAreItsAffinityWithinItsCpuLimit) {
    EXPECT_EQ(cpus_of_cpu_max("200000 100000\n"), 2u);
    EXPECT_EQ(cpus_of_cpu_max("150000 100000"), 2u) << "a part CPU still runs a thread";
    EXPECT_EQ(cpus_of_cpu_max("50000 100000"), 1u);
    EXPECT_EQ(cpus_of_cpu_max("max 100000\n"), std::nullopt) << "no limit";
    for (const char* bad : {"", "100000", "x 100000", "100000 0", "0 100000", "100000 y"})
        EXPECT_EQ(cpus_of_cpu_max(bad), std::nullopt) << "'" << bad << "'";

    const std::string cgroup = test::make_temp_dir();
    const unsigned unlimited = allowed_cpu_count(cgroup);  // no cpu.max there: the affinity alone
    EXPECT_GE(unlimited, 1u);
    std::ofstream(cgroup + "/cpu.max") << "100000 100000\n";
    EXPECT_EQ(allowed_cpu_count(cgroup), 1u) << "a one-CPU limit";
    std::ofstream(cgroup + "/cpu.max") << "max 100000\n";
    EXPECT_EQ(allowed_cpu_count(cgroup), unlimited);
    std::filesystem::remove_all(cgroup);
}

TEST(Config, HelpWinsWherePresent) {
    EXPECT_TRUE(std::holds_alternative<Show_help>(parse({"--help"})));
    EXPECT_TRUE(std::holds_alternative<Show_help>(parse({"--rank", "0", "-h"})));
}

TEST(Config, ErrorsNameTheFlagAndTheFix) {
    struct Case {
        std::vector<std::string_view> args;
        const char* message;  // expected within the error
    };
    const Case cases[] = {
        {{"--dummies", "1"}, "--dummies needs --peers; a controlled builder gets its dummies with configure"},
        {{"--rank", "0", "--dummies", "1"}, "--dummies needs --peers"},
        {{"--layout", "unfolded"}, "--layout unfolded needs --peers; a controlled builder reads each rank's function"},
        {{"--peers", "a:1"}, "--rank is required"},
        {{"--rank", "2", "--peers", "a:1,b:1"}, "--rank 2 is out of range: --peers lists 2 units, so the rank must be 0..1"},
        {{"--rank", "x", "--peers", "a:1"}, "--rank 'x': expected a whole number"},
        {{"--rank", "-1", "--peers", "a:1"}, "--rank '-1'"},
        {{"--rank", "1.5", "--peers", "a:1"}, "--rank '1.5'"},
        {{"--rank", "0", "--peers", "a"}, "--peers entry 0 'a': expected host:port"},
        {{"--rank", "0", "--peers", ":80"}, "--peers entry 0 ':80': expected host:port"},
        {{"--rank", "0", "--peers", "a:1,"}, "--peers entry 1 '': expected host:port"},
        {{"--rank", "0", "--peers", "a:0"}, "the port must be a number in 1..65535"},
        {{"--rank", "0", "--peers", "a:65536"}, "the port must be a number in 1..65535"},
        {{"--rank", "0", "--peers", "a:x"}, "--peers entry 0 'a:x': the port must be a number in 1..65535"},
        {{"--rank", "0", "--peers", "a:1,b:2,a:1"}, "--peers entry 2 'a:1': same address as entry 0"},
        {{"--rank", "0", "--rank", "1", "--peers", "a:1"}, "--rank is given twice"},
        {{"--rank", "0", "--peers", "a:1", "--verbose"}, "unknown flag --verbose"},
        {{"--rank", "0", "--peers", "a:1", "extra"}, "unexpected argument 'extra'"},
        {{"--peers", "a:1", "--rank"}, "--rank needs a value"},
        {{"--rank", "0", "--peers", "a:1", "--packing-factor", "0"}, "--packing-factor '0': expected a whole number in 1.."},
        {{"--rank", "0", "--peers", "a:1", "--http-port", "70000"}, "--http-port '70000'"},
        {{"--rank", "0", "--peers", "a:9000", "--http-port", "9000"}, "--http-port 9000 is also this unit's data port"},
        {{"--rank", "0", "--peers", "a:1", "--events", "many"}, "--events 'many'"},
        {{"--rank", "0", "--peers", "a:1", "--packing-factor", "100000000", "--fragment-size", "100"},
         "makes MFPs larger than 1024 MiB"},
        {{"--rank", "0", "--peers", "a:1", "--fragment-size", "70000"}, "--fragment-size '70000': expected a whole number in 0..65535"},
        {{"--rank", "0", "--peers", "a:1", "--barrier", "tree"}, "--barrier 'tree': expected one of none|centralized|tournament"},
        {{"--rank", "0", "--peers", "a:1", "--source", "prepared"}, "--source prepared repeats its first MFPs' payloads"},
        {{"--rank", "0", "--peers", "a:1", "--transport", "rdma"}, "--transport 'rdma': expected one of tcp|verbs"},
        {{"--rank", "0", "--peers", "a:1", "--gid-index", "256"}, "--gid-index '256'"},
        {{"--rank", "0", "--peers", "a:1", "--source", "prepared", "--output", "shm"}, "use it with --output discard"},
        {{"--rank", "0", "--peers", "a:1", "--layout", "flat"}, "--layout 'flat': expected one of folded|unfolded"},
        {{"--rank", "0", "--peers", "a:1", "--size-model", "gauss"}, "--size-model 'gauss': expected one of fixed|poisson"},
        {{"--rank", "0", "--peers", "a:1", "--barrier-every", "0"}, "--barrier-every '0'"},
        {{"--rank", "0", "--peers", "a:1,b:2", "--dummies", "1,x"}, "--dummies entry 'x': expected a rank"},
        {{"--rank", "0", "--peers", "a:1,b:2", "--dummies", "1,1"}, "--dummies lists rank 1 twice"},
        {{"--rank", "0", "--peers", "a:1,b:2", "--dummies", "2"}, "--dummies rank 2 is out of range"},
        {{"--rank", "1", "--peers", "a:1,b:2", "--dummies", "1"}, "--rank 1 is listed in --dummies"},
        {{"--rank", "0", "--peers", "a:1,b:2,c:3", "--layout", "unfolded", "--dummies", "1"},
         "--layout unfolded with --dummies leaves no live BU"},
        {{"--rank", "0", "--peers", "a:1", "--source", "file"}, "--source file needs --source-file PATH"},
        {{"--rank", "0", "--peers", "a:1", "--source-file", "x"}, "--source-file is only read with --source file"},
        {{"--rank", "0", "--peers", "a:1", "--run", "a/b"}, "--run 'a/b': expected 1..64 letters"},
        {{"--rank", "0", "--peers", "a:1", "--size-model", "poisson", "--fragment-size", "0"},
         "--fragment-size 0: --size-model poisson needs a mean of at least 1 byte"},
        {{"--rank", "0", "--peers", "a:1", "--size-model", "poisson", "--fragment-size", "20000"},
         "too large a mean for --size-model poisson"},
        {{"--peer-timeout-ms", "50"}, "--peer-timeout-ms '50': expected a whole number in 100..600000"},
        {{"--join-timeout-ms", "99"}, "--join-timeout-ms '99': expected a whole number in 100..600000"},
        {{"--join-timeout-ms", "600001"}, "--join-timeout-ms '600001': expected a whole number in 100..600000"},
        {{"--rank", "0", "--peers", "a:1", "--incomplete", "keep"}, "--incomplete 'keep': expected one of drop|flag"},
        {{"--output-timeout-ms", "0"}, "--output-timeout-ms '0': expected a whole number in 1..600000"},
        {{"--data-key-file", ""}, "--data-key-file needs a path"},
        {{"--busy-poll-us", "10001"}, "--busy-poll-us '10001': expected a whole number in 0..10000"},
        {{"--busy-poll-us", "-1"}, "--busy-poll-us '-1': expected a whole number in 0..10000"},
        {{"--data-threads", "0"}, "--data-threads '0': expected a whole number in 1..64"},
        {{"--data-threads", "65"}, "--data-threads '65': expected a whole number in 1..64"},
        {{"--tcp-streams", "0"}, "--tcp-streams '0': expected a whole number in 1..16"},
        {{"--tcp-streams", "17"}, "--tcp-streams '17': expected a whole number in 1..16"},
        {{"--verbs-depth", "0"}, "--verbs-depth '0': expected a whole number in 1..2"},
        {{"--verbs-depth", "3"}, "--verbs-depth '3': expected a whole number in 1..2"},
        {{"--transport", "verbs", "--receive-window", "1000001"},
         "--receive-window '1000001': expected a whole number in 0..1000000"},
        {{"--receive-window", "2"},
         "--receive-window 2 paces the verbs transport's receives and credits; over TCP data moves only when waited "
         "for: add --transport verbs or drop it"},
        {{"--transport", "verbs", "--tcp-streams", "2"},
         "--tcp-streams 2 splits data over TCP connections; with --transport verbs the HCA moves it"},
        {{"--inject-fault", "qp-error:2"},
         "--inject-fault 'qp-error:2': expected qp-error:R:N or short-mfp:R:N (R a peer's rank, N >= 1"},
        {{"--inject-fault", "qp-err:2:5"}, "--inject-fault 'qp-err:2:5': expected qp-error:R:N or short-mfp:R:N"},
        {{"--inject-fault", "short-mfp:2:0"}, "--inject-fault 'short-mfp:2:0': expected"},
        {{"--inject-fault", "short-mfp:x:3"}, "--inject-fault 'short-mfp:x:3': expected"},
        {{"--inject-fault", "short-mfp:2:3:4"}, "--inject-fault 'short-mfp:2:3:4': expected"},
        {{"--inject-fault", "qp-error:2:5"},
         "--inject-fault qp-error:2:5 acts on the verbs transport's queue pairs: add --transport verbs or drop it"},
        // Controlled (the operator's way), the run's parameters are checked alike.
        {{"--size-model", "poisson", "--fragment-size", "0"},
         "--fragment-size 0: --size-model poisson needs a mean of at least 1 byte"},
        {{"--rank", "2", "--packing-factor", "100000000", "--fragment-size", "100"}, "makes MFPs larger than 1024 MiB"},
        {{"--source", "prepared"}, "use it with --output discard"},
        {{"--source", "file"}, "--source file needs --source-file PATH"},
    };
    for (const auto& c : cases) {
        const Command_line parsed = parse(c.args);
        const auto* error = std::get_if<Usage_error>(&parsed);
        ASSERT_NE(error, nullptr) << c.message;
        EXPECT_NE(error->message.find(c.message), std::string::npos) << error->message;
    }
}

// The flag table is the one source of each flag's default: what it says
// is what a Config holds when the flag is not given.
TEST(FlagTable, EachDefaultIsWhatAConfigHoldsWithoutTheFlag) {
    const Config defaults;
    std::size_t checked = 0;
    for (const Flag_spec& flag : flag_table()) {
        if (flag.show == nullptr) {
            EXPECT_TRUE(flag.fallback.empty()) << flag.name << ": a default the table cannot check";
            continue;
        }
        EXPECT_EQ(flag.show(defaults), flag.fallback) << flag.name;
        ++checked;
    }
    EXPECT_GE(checked, 20u);
}

// The range the table states is the range the parser takes, at both ends.
TEST(FlagTable, EachNumberTakesItsRangeAndRefusesOneBeyondNamingTheFlag) {
    for (const Flag_spec& flag : flag_table()) {
        if (flag.min == 0 && flag.max == 0) continue;
        SCOPED_TRACE(std::string(flag.name));
        for (const std::uint64_t value : {flag.min, flag.max}) {
            Flag_state state;
            EXPECT_EQ(flag.parse(flag, std::to_string(value), state), std::nullopt) << value;
        }
        const auto refused = [&](std::string_view value) {
            Flag_state state;
            const auto error = flag.parse(flag, value, state);
            return error && error->message.starts_with(std::string(flag.name) + " '" + std::string(value) + "'") &&
                   error->message.find(std::to_string(flag.min) + ".." + std::to_string(flag.max)) != std::string::npos;
        };
        if (flag.min > 0) {
            EXPECT_TRUE(refused(std::to_string(flag.min - 1)));
        }
        if (flag.max < std::numeric_limits<std::uint64_t>::max()) {
            EXPECT_TRUE(refused(std::to_string(flag.max + 1)));
        }
    }
}

TEST(FlagTable, EachChoiceIsTakenAndAnotherRefusedListingThem) {
    for (const Flag_spec& flag : flag_table()) {
        if (flag.choices.empty()) continue;
        std::string listed;
        for (const std::string_view choice : flag.choices) {
            Flag_state state;
            EXPECT_EQ(flag.parse(flag, choice, state), std::nullopt) << flag.name << " " << choice;
            ASSERT_NE(flag.show, nullptr) << flag.name;
            EXPECT_EQ(flag.show(state.config), choice) << flag.name;
            listed += (listed.empty() ? "" : "|") + std::string(choice);
        }
        Flag_state state;
        const auto error = flag.parse(flag, "bogus", state);
        ASSERT_TRUE(error) << flag.name;
        EXPECT_NE(error->message.find("expected one of " + listed), std::string::npos) << error->message;
    }
}

// --help and --describe-flags (what the operator's tests read) list every
// flag of the table, with its range, choices and default.
TEST(FlagTable, HelpAndDescriptionListEveryFlag) {
    EXPECT_TRUE(std::holds_alternative<Describe_flags>(parse({"--describe-flags"})));
    const std::string help = usage();
    const nlohmann::json described = nlohmann::json::parse(describe_flags());
    ASSERT_EQ(described.at("flags").size(), flag_table().size());
    std::size_t at = 0;
    for (const Flag_spec& flag : flag_table()) {
        EXPECT_NE(help.find("  " + std::string(flag.name) + " " + std::string(flag.value_name)), std::string::npos)
            << flag.name;
        if (!flag.fallback.empty()) {
            EXPECT_NE(help.find("(default " + std::string(flag.fallback) + ")"), std::string::npos) << flag.name;
        }
        const nlohmann::json& entry = described.at("flags").at(at++);
        EXPECT_EQ(entry.at("name"), flag.name);
        EXPECT_EQ(entry.at("default"), flag.fallback);
        EXPECT_EQ(entry.at("environment"), flag.environment);
        if (flag.min != 0 || flag.max != 0) {
            EXPECT_EQ(entry.at("min").get<std::uint64_t>(), flag.min) << flag.name;
            EXPECT_EQ(entry.at("max").get<std::uint64_t>(), flag.max) << flag.name;
        } else {
            EXPECT_FALSE(entry.contains("min")) << flag.name;
        }
        EXPECT_EQ(entry.contains("choices"), !flag.choices.empty()) << flag.name;
    }
    for (const std::string_view line : {"--help", "--describe-flags"})
        EXPECT_NE(help.find(line), std::string::npos) << line;
    // Every line fits 79 columns.
    std::size_t begin = 0;
    while (begin < help.size()) {
        const std::size_t end = std::min(help.find('\n', begin), help.size());
        EXPECT_LE(end - begin, 79u) << help.substr(begin, end - begin);
        begin = end + 1;
    }
}

}  // namespace
}  // namespace eb
