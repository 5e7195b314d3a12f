#pragma once

// N controlled eb-builder processes on 127.0.0.1, driven over the control
// API as the operator drives them: for the control and fault suites.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.hpp"
#include "base/rank.hpp"
#include "schedule/rank_table.hpp"
#include "test_support.hpp"

namespace eb::test {

using namespace std::chrono_literals;

inline constexpr const char* controlled_token = "s3cret-token";
inline constexpr std::uint64_t controlled_packing_factor = 100;

// A stopped unit's status. The unit told to stop reports READY at once, but
// its set stops at the end of the cycle that carries the vote, and until
// then it is still building: its counters are final only once it is idle.
inline constexpr std::string_view stopped = R"("state":"READY","activity":"idle")";

// One HTTP request over a real socket: "METHOD path" with an optional bearer
// token and JSON body. Returns the status code and body (0 if nobody answered).
inline Http_reply request(std::uint16_t port, std::string_view method, std::string_view path,
                         std::optional<std::string_view> bearer, std::string_view body = {}) {
    const Fd fd = connect_to(port);
    if (!fd) return {};
    std::string out = std::string(method) + " " + std::string(path) + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n";
    if (bearer) out += "Authorization: Bearer " + std::string(*bearer) + "\r\n";
    out += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    out += body;
    for (std::size_t sent = 0; sent < out.size();) {
        const ssize_t n = ::send(fd.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return {};
        sent += static_cast<std::size_t>(n);
    }
    std::string reply;
    char chunk[4096];
    for (ssize_t n; (n = ::recv(fd.get(), chunk, sizeof chunk, 0)) > 0;) reply.append(chunk, static_cast<std::size_t>(n));
    const std::size_t head_end = reply.find("\r\n\r\n");
    if (reply.size() < 12 || head_end == std::string::npos) return {};
    return {std::stoi(reply.substr(9, 3)), reply.substr(head_end + 4)};
}

// N controlled eb-builder processes (no --peers), one per rank, all started
// at once; the test plays the operator.
class Controlled_set {
public:
    explicit Controlled_set(Rank units) : Controlled_set(units, all_ranks(units)) {}
    // Starts processes for the `started` ranks only, each with `flags` added.
    Controlled_set(Rank units, const std::set<Rank>& started, std::vector<std::string> flags = {})
        : units_(units), ports_(free_ports(2 * units)), dir_(make_temp_dir()), flags_(std::move(flags)) {
        std::ofstream(dir_ + "/token") << controlled_token << "\n";
        for (const Rank rank : started) start(rank);
    }

    // Starts (or restarts) the process of `rank`, with `more` flags of its
    // own; each start logs to its own file.
    void start(Rank rank, const std::vector<std::string>& more = {}) {
        processes_.resize(units_);
        starts_.resize(units_);
        std::vector<std::string> args{"--rank", std::to_string(rank), "--http-port", std::to_string(http_port(rank)),
                                      "--token-file", dir_ + "/token", "--packing-factor", std::to_string(controlled_packing_factor),
                                      "--fragment-size", "64", "--barrier", "tournament"};
        // A test's own --rate replaces the default: the builder takes each flag once.
        if (std::find(flags_.begin(), flags_.end(), "--rate") == flags_.end()) args.insert(args.end(), {"--rate", "200000"});
        args.insert(args.end(), flags_.begin(), flags_.end());
        args.insert(args.end(), more.begin(), more.end());
        const std::vector<std::string> transport = transport_flags();
        args.insert(args.end(), transport.begin(), transport.end());
        processes_[rank] = std::make_unique<Child>(
            EB_BUILDER_EXE, args,
            dir_ + "/builder-" + std::to_string(rank) + "-" + std::to_string(starts_[rank]++) + ".log");
    }

    static std::set<Rank> all_ranks(Rank units) {
        std::set<Rank> all;
        for (Rank rank = 0; rank < units; ++rank) all.insert(rank);
        return all;
    }
    std::set<Rank> ranks() const { return all_ranks(units_); }
    std::uint16_t data_port(Rank rank) const { return ports_[rank]; }
    std::uint16_t http_port(Rank rank) const { return ports_[units_ + rank]; }
    Child& process(Rank rank) { return *processes_[rank]; }

    // The rank table document the operator publishes (operator/docs/rank-table.md).
    // `functions` by rank: RU+BU, RU or BU for a live rank, empty for a
    // dummy, unread_bu for a BU whose unit's source is unread.
    static constexpr std::string_view unread_bu = "BU, source unread";
    std::string configure_body(Rank rank, std::uint64_t epoch, std::string_view layout,
                               const std::vector<std::string>& functions) const {
        std::string ranks;
        for (Rank r = 0; r < units_; ++r) {
            std::string live = functions[r] == unread_bu ? "live\",\"function\":\"BU\",\"sourceUnread\":true"
                                                         : "live\",\"function\":\"" + functions[r] + "\"";
            if (r < streams_.by_rank.size() && !streams_.by_rank[r].empty() && functions[r].starts_with("RU"))
                live += ",\"sources\":" + json_list(streams_.by_rank[r]);
            ranks += (r == 0 ? "" : ",") + std::string("{\"rank\":") + std::to_string(r) +
                     ",\"address\":\"127.0.0.1:" + std::to_string(ports_[r]) + "\",\"state\":\"" +
                     (functions[r].empty() ? "dummy\"" : live) + "}";
        }
        return "{\"rank\":" + std::to_string(rank) + ",\"table\":{\"version\":\"eventbuilder.daq.io/ranktable/v1\"," +
               "\"run\":\"test\",\"epoch\":" + std::to_string(epoch) + ",\"layout\":\"" + std::string(layout) +
               "\",\"ranks\":[" + ranks + "]" +
               (streams_.unread.empty() ? "" : ",\"unreadStreams\":" + json_list(streams_.unread)) + "}}";
    }
    // The readout streams of the tables configure_body writes from now on:
    // each live RU's (by rank; dummies get none) and the unread ones.
    void name_streams(Readout_streams streams) { streams_ = std::move(streams); }
    // A Folded table: the `live` ranks run RU+BU.
    std::string configure_body(Rank rank, std::uint64_t epoch, const std::set<Rank>& live) const {
        std::vector<std::string> functions(units_);
        for (const Rank r : live) functions[r] = "RU+BU";
        return configure_body(rank, epoch, "Folded", functions);
    }

    test::Http_reply command(Rank rank, std::string_view name, std::string_view body = {}) {
        return request(http_port(rank), "POST", "/control/" + std::string(name), controlled_token, body);
    }
    void configure_all(std::uint64_t epoch, const std::set<Rank>& live) { configure(ranks(), epoch, live); }
    // Configures the processes of `ranks` only.
    void configure(const std::set<Rank>& ranks, std::uint64_t epoch, const std::set<Rank>& live) {
        for (const Rank rank : ranks) {
            const auto reply = command(rank, "configure", configure_body(rank, epoch, live));
            ASSERT_EQ(reply.status, 200) << "rank " << rank << ": " << reply.body;
        }
    }
    void configure_all(std::uint64_t epoch, std::string_view layout, const std::vector<std::string>& functions) {
        for (Rank rank = 0; rank < units_; ++rank) {
            const auto reply = command(rank, "configure", configure_body(rank, epoch, layout, functions));
            ASSERT_EQ(reply.status, 200) << "rank " << rank << ": " << reply.body;
        }
    }
    void command_all(std::string_view name) {
        for (Rank rank = 0; rank < units_; ++rank) ASSERT_EQ(command(rank, name).status, 200) << name << " " << rank;
    }

    std::string status(Rank rank) const { return http_get(http_port(rank), "/status").value_or(Http_reply{}).body; }
    std::uint64_t number(Rank rank, std::string_view key) const { return json_number(status(rank), key).value_or(0); }
    std::string text(Rank rank, std::string_view key) const { return json_string(status(rank), key).value_or("?"); }
    // Every eb_parse_errors_total series of the rank's /metrics, summed:
    // MEPs its checking output found wrong (a missing source, a bad
    // payload, an event range out of sequence) and source MFPs rejected.
    std::uint64_t parse_errors(Rank rank) const {
        const std::string metrics = http_get(http_port(rank), "/metrics").value_or(Http_reply{}).body;
        std::uint64_t sum = 0, series = 0;
        for (std::size_t at = 0; (at = metrics.find("\neb_parse_errors_total{", at)) != std::string::npos; ++series) {
            at = metrics.find("} ", at) + 2;
            sum += std::stoull(metrics.substr(at, metrics.find('\n', at) - at));
        }
        return series > 0 ? sum : ~std::uint64_t{0};  // no series: the metrics did not answer
    }

    // Counts of `ranks` summed, as their /status reports them.
    struct Totals {
        std::uint64_t built = 0, incomplete = 0, dropped = 0, in_doubt = 0;
        Totals& operator+=(const Totals& other) {
            built += other.built;
            incomplete += other.incomplete;
            dropped += other.dropped;
            in_doubt += other.in_doubt;
            return *this;
        }
    };
    Totals totals(const std::set<Rank>& ranks) const {
        Totals sum;
        for (const Rank rank : ranks) {
            const std::string body = status(rank);
            sum.built += json_number(body, "events_built").value_or(0);
            sum.incomplete += json_number(body, "events_incomplete").value_or(0);
            sum.dropped += json_number(body, "events_dropped").value_or(0);
            sum.in_doubt += json_number(body, "events_in_doubt").value_or(0);
        }
        return sum;
    }

    // Waits until every rank's /status answers (the processes are up).
    bool all_answer() const {
        return eventually([&] {
            for (Rank rank = 0; rank < units_; ++rank)
                if (!http_get(http_port(rank), "/healthz")) return false;
            return true;
        }, 10s);
    }

    // Waits until the /status of every rank in `ranks` contains `part`.
    bool all_report(const std::set<Rank>& ranks, std::string_view part, std::chrono::milliseconds timeout) const {
        return eventually([&] {
            for (const Rank rank : ranks)
                if (status(rank).find(part) == std::string::npos) return false;
            return true;
        }, timeout);
    }

    // Pauses the set, so that the victim's counts are final, kills the victim
    // outright and resumes the others. Returns the victim's counts.
    Totals kill_while_paused(Rank victim) {
        EXPECT_EQ(command(0, "pause").status, 200);
        EXPECT_TRUE(all_report(ranks(), R"("activity":"paused")", 10s)) << logs();
        const Totals counted = totals({victim});
        process(victim).signal(SIGKILL);
        EXPECT_TRUE(process(victim).wait_exit(5s));
        for (Rank rank = 0; rank < units_; ++rank)
            if (rank != victim) {
                EXPECT_EQ(command(rank, "resume").status, 200) << rank;
            }
        return counted;
    }

    std::string logs() const {
        std::string all;
        for (Rank rank = 0; rank < units_; ++rank)
            if (processes_[rank]) all += "--- rank " + std::to_string(rank) + " ---\n" + processes_[rank]->log();
        return all;
    }

private:
    Rank units_;
    std::vector<std::uint16_t> ports_;  // data ports, then HTTP ports
    std::string dir_;
    std::vector<std::string> flags_;  // added to every process's command line
    std::vector<std::unique_ptr<Child>> processes_;
    std::vector<int> starts_;  // by rank
    Readout_streams streams_;

    static std::string json_list(const std::vector<std::string>& names) {
        std::string list;
        for (const std::string& name : names) list += (list.empty() ? "\"" : ",\"") + name + "\"";
        return "[" + list + "]";
    }
};


}  // namespace eb::test
