#include "control/http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "control/control_api.hpp"
#include "base/fd.hpp"
#include "control/http_server.hpp"
#include "base/stop_flag.hpp"
#include "test_support.hpp"

namespace eb {
namespace {

TEST(Http, FindsHeadersByCaseInsensitiveName) {
    const Http_request request{"POST", "/control/configure",
                               {{"Host", "eb-0:8080"}, {"authorization", "Bearer abc"}, {"X-Empty", ""}}, ""};
    EXPECT_EQ(request.header("Authorization"), "Bearer abc");
    EXPECT_EQ(request.header("HOST"), "eb-0:8080");
    EXPECT_EQ(request.header("x-empty"), "");
    EXPECT_EQ(request.header("Accept"), std::nullopt);
}

TEST(Http, ErrorBodiesAreEscapedJson) {
    const Http_response response = error_response(400, "table.run 'a\"b\\c\n\xff'");
    EXPECT_EQ(response.status, 400);
    EXPECT_EQ(response.body, "{\"error\":\"table.run 'a\\\"b\\\\c\\n\xEF\xBF\xBD'\"}\n")
        << "invalid UTF-8 from the request becomes U+FFFD";
}

// The unit, as far as the server needs one: takes configure and start.
class Test_target final : public Control_target {
public:
    Command_outcome command(Command command, const Configure_request* configure) override {
        const std::lock_guard lock(mutex_);
        commands_.push_back(command);
        if (configure) epoch_ = configure->epoch;
        const Transition result = transition(state_, command);
        if (!result.allowed) return {Command_outcome::Kind::refused, result.refusal};
        state_ = result.next;
        return {};
    }
    std::string status_json() const override {
        const std::lock_guard lock(mutex_);
        return R"({"state":")" + std::string(control_state_name(state_)) + R"(","epoch":)" + std::to_string(epoch_) +
               "}";
    }
    std::string metrics_text() const override { return "eb_up 1\n"; }
    Control_state state() const override {
        const std::lock_guard lock(mutex_);
        return state_;
    }
    std::optional<Rank> fixed_rank() const override { return std::nullopt; }

    std::vector<Command> commands() const {
        const std::lock_guard lock(mutex_);
        return commands_;
    }

private:
    mutable std::mutex mutex_;
    Control_state state_ = Control_state::not_ready;
    std::uint64_t epoch_ = 0;
    std::vector<Command> commands_;
};

using test::connect_to;

// Sends `parts` over one real TCP connection to 127.0.0.1:port, `pause`
// between them, and returns everything the server answered until it closed.
std::string exchange(std::uint16_t port, const std::vector<std::string>& parts,
                     std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
    const Fd fd = connect_to(port);
    if (!fd) return "connect failed";
    for (const std::string& part : parts) {
        if (::send(fd.get(), part.data(), part.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(part.size()))
            break;  // the server may answer and close early (413)
        std::this_thread::sleep_for(pause);
    }
    std::string reply;
    char chunk[4096];
    while (true) {
        pollfd watch{fd.get(), POLLIN, 0};
        if (::poll(&watch, 1, 5000) <= 0) break;
        const ssize_t got = ::recv(fd.get(), chunk, sizeof chunk, 0);
        if (got <= 0) break;
        reply.append(chunk, static_cast<std::size_t>(got));
    }
    return reply;
}

std::string body_of(const std::string& reply) {
    const std::size_t end = reply.find("\r\n\r\n");
    return end == std::string::npos ? "" : reply.substr(end + 4);
}

class Http_server_test : public ::testing::Test {
protected:
    void SetUp() override {
        server_.emplace(0, target_, token_, stop_);
        serving_ = std::jthread([this] { server_->serve(); });
    }
    void TearDown() override {
        stop_.request();
        serving_.join();
    }
    std::uint16_t port() const { return server_->port(); }

    Test_target target_;
    const Control_token token_{"t0ken"};
    Stop_flag stop_;
    std::optional<Http_server> server_;
    std::jthread serving_;
};

const std::string configure_body =
    R"({"rank": 0, "table": {"version": "eventbuilder.daq.io/ranktable/v1", "epoch": 4, "layout": "Folded",)"
    R"( "ranks": [{"rank": 0, "address": "127.0.0.1:7000", "state": "live"}]}})";

std::string configure_head(std::size_t length, std::string_view extra = "") {
    return "POST /control/configure HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t0ken\r\nConnection: close\r\n"
           "Content-Type: application/json\r\nContent-Length: " +
           std::to_string(length) + "\r\n" + std::string(extra) + "\r\n";
}

std::string status_line(const std::string& reply) { return reply.substr(0, reply.find("\r\n")); }
bool has_header(const std::string& reply, std::string_view line) {
    return reply.substr(0, reply.find("\r\n\r\n")).find("\r\n" + std::string(line) + "\r\n") != std::string::npos;
}

TEST_F(Http_server_test, TakesACommandWithBodyAndTokenOverTcp) {
    ASSERT_NE(port(), 0);
    // The body arrives in pieces, after the head: the server waits for all of it.
    const std::vector<std::string> parts = {configure_head(configure_body.size()), configure_body.substr(0, 40),
                                            configure_body.substr(40)};
    const std::string reply = exchange(port(), parts, std::chrono::milliseconds(50));
    EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK") << reply;
    EXPECT_TRUE(has_header(reply, "Content-Type: application/json")) << reply;
    EXPECT_EQ(body_of(reply), "{\"state\":\"READY\",\"epoch\":4}\n");
    EXPECT_EQ(target_.commands(), std::vector<Command>{Command::configure});

    const std::string start = exchange(port(), {"POST /control/start HTTP/1.1\r\nAuthorization: Bearer t0ken\r\n"
                                                "Connection: close\r\nContent-Length: 0\r\n\r\n"});
    EXPECT_EQ(status_line(start), "HTTP/1.1 200 OK") << start;
    EXPECT_EQ(target_.state(), Control_state::running);

    const std::string again =
        exchange(port(), {"POST /control/start HTTP/1.1\r\nAuthorization: Bearer t0ken\r\nConnection: close\r\n\r\n"});
    EXPECT_EQ(status_line(again), "HTTP/1.1 409 Conflict") << again;
    EXPECT_EQ(body_of(again), R"({"error":"cannot start in state RUNNING; allowed: configure, pause, stop, reset",)"
                              R"("state":"RUNNING","allowed":["configure","pause","stop","reset"]})"
                              "\n");
}

TEST_F(Http_server_test, AnswersReadsAndRefusals) {
    const std::string status = exchange(port(), {"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"});
    EXPECT_EQ(body_of(status), "{\"state\":\"NOT_READY\",\"epoch\":0}\n") << status;
    const std::string head = exchange(port(), {"HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"});
    EXPECT_EQ(status_line(head), "HTTP/1.1 200 OK") << head;
    EXPECT_EQ(body_of(head), "") << "HEAD: no body";

    const std::string wrong = exchange(
        port(), {"POST /control/reset HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nConnection: close\r\n\r\n"});
    EXPECT_EQ(status_line(wrong), "HTTP/1.1 401 Unauthorized") << wrong;
    EXPECT_TRUE(has_header(wrong, "WWW-Authenticate: Bearer")) << wrong;

    // Refused from the head alone, without waiting for the 5 MiB.
    const std::string big = exchange(port(), {configure_head(5 << 20), std::string(64 << 10, ' ')});
    EXPECT_EQ(status_line(big), "HTTP/1.1 413 Content Too Large") << big;
    EXPECT_EQ(body_of(big), "{\"error\":\"request body of 5242880 bytes is over the limit of 4194304 bytes (4 "
                            "MiB)\"}\n");

    const std::string long_head =
        exchange(port(), {"GET /status HTTP/1.1\r\nHost: x\r\nX-Long: " + std::string(32 << 10, 'x') + "\r\n\r\n"});
    EXPECT_EQ(status_line(long_head), "HTTP/1.1 431 Request Header Fields Too Large") << status_line(long_head);

    const std::string garbage = exchange(port(), {"hello there\r\n\r\n"});
    EXPECT_EQ(status_line(garbage).substr(0, 12), "HTTP/1.1 400") << garbage;
    EXPECT_TRUE(target_.commands().empty());
}

TEST_F(Http_server_test, SendsContinueWhenAsked) {
    // curl asks for this before sending a body over 1 KiB and waits a second without it.
    const Fd fd = connect_to(port());
    const std::string head = configure_head(configure_body.size(), "Expect: 100-continue\r\n");
    ASSERT_EQ(::send(fd.get(), head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    pollfd watch{fd.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&watch, 1, 300), 1) << "no 100 Continue within 300 ms";
    char interim[64] = {};
    const ssize_t got = ::recv(fd.get(), interim, sizeof interim - 1, 0);
    EXPECT_EQ(std::string_view(interim, static_cast<std::size_t>(std::max<ssize_t>(got, 0))),
              "HTTP/1.1 100 Continue\r\n\r\n");
    ASSERT_EQ(::send(fd.get(), configure_body.data(), configure_body.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(configure_body.size()));
    std::string reply;
    char chunk[4096];
    while (::poll(&watch, 1, 5000) > 0) {
        const ssize_t n = ::recv(fd.get(), chunk, sizeof chunk, 0);
        if (n <= 0) break;
        reply.append(chunk, static_cast<std::size_t>(n));
    }
    EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK") << reply;
}

TEST_F(Http_server_test, AStalledBodyIsDroppedAndOthersServed) {
    // A head promising a body, then nothing: the connection is closed after
    // the idle timeout, and clients meanwhile are served.
    const Fd stalled = connect_to(port());
    const std::string head = configure_head(100);
    ASSERT_EQ(::send(stalled.get(), head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    const auto started = std::chrono::steady_clock::now();
    const std::string status = exchange(port(), {"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"});
    EXPECT_EQ(status_line(status), "HTTP/1.1 200 OK") << status;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1)) << "served while one stalls";
    pollfd watch{stalled.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&watch, 1, (Http_server::idle_timeout_seconds + 2) * 1000), 1) << "the stalled client is kept";
    char byte;
    EXPECT_LE(::recv(stalled.get(), &byte, 1, 0), 0) << "closed without an answer";
    EXPECT_TRUE(target_.commands().empty());
}

// Stray clients come from other loopback addresses (127/8 is all loopback):
// other hosts to the server, as the probes from 127.0.0.1 come from the
// kubelet's.
constexpr const char* stray_address = "127.0.0.2";
std::string spread_address(unsigned client) { return "127.0.1." + std::to_string(client % 250 + 1); }

// How many of `clients` the server has closed.
std::size_t closed_by_server(const std::vector<Fd>& clients) {
    std::vector<pollfd> watch;
    for (const Fd& fd : clients) watch.push_back({fd.get(), POLLIN, 0});
    if (::poll(watch.data(), watch.size(), 0) < 0) return 0;
    std::size_t closed = 0;
    for (const pollfd& entry : watch) {
        char byte;
        if ((entry.revents & (POLLHUP | POLLERR)) != 0 ||
            ((entry.revents & POLLIN) != 0 && ::recv(entry.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0))
            ++closed;
    }
    return closed;
}

TEST_F(Http_server_test, ProbesAreAnsweredWithin100MsWhileOneAddressOpensHundredsOfIdleOrTricklingClients) {
    // 256 clients that connect and say nothing, 256 that send their head a
    // byte at a time, all from one address: the server keeps
    // max_connections_per_address of them and closes the others at once, so
    // the liveness probe from another address is answered within 100 ms
    // (the builder pods' probes time out after 3 s).
    constexpr int idle_clients = 256, trickling_clients = 256;
    std::vector<Fd> idle, trickling, all;
    for (int i = 0; i < idle_clients; ++i) idle.push_back(connect_to(port(), stray_address));
    for (int i = 0; i < trickling_clients; ++i) trickling.push_back(connect_to(port(), stray_address));
    for (const auto* group : {&idle, &trickling})
        for (const Fd& fd : *group) {
            ASSERT_TRUE(fd) << "a client could not connect from " << stray_address;
            all.push_back(Fd(::dup(fd.get())));
        }
    std::size_t closed = 0;
    EXPECT_TRUE(test::eventually([&] {
        closed = closed_by_server(all);
        return closed >= all.size() - Http_server::max_connections_per_address;
    }, std::chrono::seconds(5))) << closed << " of " << all.size() << " closed";
    std::atomic<bool> done{false};
    std::jthread trickle([&] {
        const std::string head = "GET /status HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(4000, 'y');
        for (std::size_t at = 0; at < head.size() && !done; ++at) {
            for (const Fd& fd : trickling) ::send(fd.get(), &head[at], 1, MSG_NOSIGNAL);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
    std::vector<double> latencies_ms;
    for (int probe = 0; probe < 20; ++probe) {
        const auto sent = std::chrono::steady_clock::now();
        const std::string reply = exchange(port(), {"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"});
        latencies_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent).count());
        ASSERT_EQ(status_line(reply), "HTTP/1.1 200 OK") << "probe " << probe << ": " << reply;
        EXPECT_LT(latencies_ms.back(), 100.0) << "probe " << probe;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // probes spread over a second of trickling
    }
    done = true;
    std::sort(latencies_ms.begin(), latencies_ms.end());
    std::printf("healthz with %d idle and %d trickling clients from one address (%zu closed at once): median %.2f ms, "
                "max %.2f ms over %zu probes\n",
                idle_clients, trickling_clients, closed, latencies_ms[latencies_ms.size() / 2], latencies_ms.back(),
                latencies_ms.size());
}

TEST_F(Http_server_test, AClientThatLeavesInTheMiddleOfItsHeadFreesItsSlotAtOnce) {
    // More clients than slots (from addresses enough to stay within each
    // one's share), each sending part of a request line and closing: the
    // server must see each close at once (libmicrohttpd's edge-triggered
    // epoll missed a close that came with the data, and held the slot for
    // the idle timeout), so a probe behind them is answered.
    const std::string part = "GET /sta";
    for (unsigned i = 0; i < 2 * Http_server::max_connections; ++i) {
        const Fd fd = connect_to(port(), spread_address(i).c_str());
        ASSERT_TRUE(fd) << "client " << i;
        ASSERT_EQ(::send(fd.get(), part.data(), part.size(), MSG_NOSIGNAL), static_cast<ssize_t>(part.size()));
    }
    const auto sent = std::chrono::steady_clock::now();
    const std::string reply = exchange(port(), {"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"});
    const auto waited = std::chrono::steady_clock::now() - sent;
    EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK") << reply;
    EXPECT_LT(waited, std::chrono::seconds(1)) << "held behind closed clients until the idle timeout";
    std::printf("healthz behind %u clients that left mid-head: answered after %.3f s\n", 2 * Http_server::max_connections,
                std::chrono::duration<double>(waited).count());
}

TEST_F(Http_server_test, ConnectionsBeyondTheLimitWaitAtMostTheIdleTimeout) {
    // Every slot taken by clients that say nothing, from more addresses than
    // the per-address share stops (a storm from many hosts): a newcomer
    // waits in the listen queue until the idle timeout frees slots, then is
    // served.
    std::vector<Fd> flood;
    for (unsigned i = 0; i < Http_server::max_connections + 8; ++i) {
        flood.push_back(connect_to(port(), spread_address(i).c_str()));
        ASSERT_TRUE(flood.back()) << "client " << i;
    }
    const auto sent = std::chrono::steady_clock::now();
    const std::string reply = exchange(port(), {"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"});
    const auto waited = std::chrono::steady_clock::now() - sent;
    EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK") << reply;
    EXPECT_LT(waited, std::chrono::seconds(Http_server::idle_timeout_seconds + 2));
    std::printf("healthz behind %u idle connections from %u addresses: answered after %.2f s\n",
                Http_server::max_connections + 8, 250u, std::chrono::duration<double>(waited).count());
    pollfd watch{flood.front().get(), POLLIN, 0};
    ASSERT_EQ(::poll(&watch, 1, 1000), 1);
    char byte;
    EXPECT_EQ(::recv(flood.front().get(), &byte, 1, 0), 0) << "an idle client is closed after the idle timeout";
}

}  // namespace
}  // namespace eb
