#include "http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "control_api.hpp"
#include "fd.hpp"
#include "http_server.hpp"
#include "stop_flag.hpp"

namespace eb {
namespace {

TEST(Http, ParsesTheRequestLine) {
    struct Case {
        std::string_view head;
        bool valid;
        std::string_view method, path;
    };
    const Case cases[] = {
        {"GET /status HTTP/1.1\r\nHost: x\r\n\r\n", true, "GET", "/status"},
        {"GET /metrics?name[]=eb_up HTTP/1.0\r\n\r\n", true, "GET", "/metrics"},
        {"HEAD /healthz HTTP/1.1\n\n", true, "HEAD", "/healthz"},
        {"GET", false, {}, {}},
        {"GET /status", false, {}, {}},
        {"GET status HTTP/1.1\r\n\r\n", false, {}, {}},
        {" /status HTTP/1.1\r\n\r\n", false, {}, {}},
        {"GET /status SMTP\r\n\r\n", false, {}, {}},
        {"", false, {}, {}},
    };
    for (const auto& c : cases) {
        const auto request = parse_request_head(c.head);
        ASSERT_EQ(request.has_value(), c.valid) << c.head;
        if (!request) continue;
        EXPECT_EQ(request->method, c.method);
        EXPECT_EQ(request->path, c.path);
    }
}

TEST(Http, ParsesHeadersByCaseInsensitiveName) {
    const auto request = parse_request_head(
        "POST /control/configure HTTP/1.1\r\nHost: eb-0:8080\r\nauthorization:  Bearer abc \r\n"
        "CONTENT-LENGTH: 12\r\nContent-Type:application/json\r\nX-Empty:\r\n\r\n");
    ASSERT_TRUE(request);
    EXPECT_EQ(request->headers.size(), 5u);
    EXPECT_EQ(request->header("Authorization"), "Bearer abc") << "surrounding spaces removed";
    EXPECT_EQ(request->header("content-length"), "12");
    EXPECT_EQ(request->header("Content-Type"), "application/json");
    EXPECT_EQ(request->header("x-empty"), "");
    EXPECT_EQ(request->header("Accept"), std::nullopt);

    for (const std::string_view bad : {"GET / HTTP/1.1\r\nno colon\r\n\r\n", "GET / HTTP/1.1\r\n: no name\r\n\r\n",
                                       "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
                                       "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"})
        EXPECT_FALSE(parse_request_head(bad)) << bad;
}

TEST(Http, ReadsTheBodyByContentLength) {
    using enum Http_parse::Kind;
    const std::string head = "POST /control/configure HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
    EXPECT_EQ(parse_request("POST /control/configure HTTP/1.1\r\nContent-Le").kind, incomplete);
    EXPECT_FALSE(parse_request("POST /control/configure HTTP/1.1\r\n").head_complete);

    const Http_parse partial = parse_request(head + "abc");
    EXPECT_EQ(partial.kind, incomplete);
    EXPECT_TRUE(partial.head_complete) << "only the body is missing";
    EXPECT_FALSE(partial.expects_continue);

    const std::string received = head + "abcde" + "GET / HTTP/1.1\r\n\r\n";  // the request's views point into it
    const Http_parse whole = parse_request(received);
    ASSERT_EQ(whole.kind, complete);
    EXPECT_EQ(whole.request.body, "abcde") << "bytes after the body are not part of it";
    EXPECT_EQ(whole.request.path, "/control/configure");

    // No Content-Length: no body, POST included.
    const Http_parse empty = parse_request("POST /control/start HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(empty.kind, complete);
    EXPECT_EQ(empty.request.body, "");

    const Http_parse continued =
        parse_request("POST /control/configure HTTP/1.1\r\nContent-Length: 2000\r\nExpect: 100-Continue\r\n\r\n");
    EXPECT_EQ(continued.kind, incomplete);
    EXPECT_TRUE(continued.expects_continue);

    EXPECT_EQ(parse_request("POST / HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\nabc").kind, complete)
        << "a repeated equal Content-Length is harmless";
}

TEST(Http, RefusesWhatItCannotRead) {
    struct Case {
        std::string received;
        int status;
        std::string error;
    };
    const std::string post = "POST /control/configure HTTP/1.1\r\n";
    const Case cases[] = {
        {post + "Content-Length: 4194305\r\n\r\n", 413,
         "request body of 4194305 bytes is over the limit of 4194304 bytes (4 MiB)"},
        {post + "Content-Length: 99999999999999999999999\r\n\r\n", 413,
         "request body of 99999999999999999999999 bytes is over the limit of 4194304 bytes (4 MiB)"},
        {post + "Transfer-Encoding: chunked\r\n\r\n", 411,
         "Transfer-Encoding 'chunked' is not supported; send the body with a Content-Length (at most 4 MiB)"},
        {post + "Content-Length: -1\r\n\r\n", 400, "Content-Length '-1': expected a number of bytes"},
        {post + "Content-Length: 1x\r\n\r\n", 400, "Content-Length '1x': expected a number of bytes"},
        {post + "Content-Length:\r\n\r\n", 400, "Content-Length '': expected a number of bytes"},
        {post + "Content-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
         "two different Content-Length headers; send one"},
        {"GET /status\r\n\r\n", 400,
         "malformed request: expected 'METHOD /path HTTP/1.1', then 'Name: value' headers"},
        {"GET / HTTP/1.1\r\nX: " + std::string(max_request_head, 'x'), 431,
         "request head over 8192 bytes; send fewer headers"},
        {"GET / HTTP/1.1\r\nX: " + std::string(max_request_head, 'x') + "\r\n\r\n", 431,
         "request head over 8192 bytes; send fewer headers"},
    };
    for (const auto& c : cases) {
        const Http_parse parse = parse_request(c.received);
        ASSERT_EQ(parse.kind, Http_parse::Kind::failed) << c.received.substr(0, 100);
        EXPECT_EQ(parse.error.status, c.status) << c.received.substr(0, 100);
        EXPECT_EQ(parse.error.content_type, "application/json");
        EXPECT_EQ(parse.error.body, "{\"error\":\"" + c.error + "\"}\n");
    }
    // At the limit itself, the body is awaited.
    EXPECT_EQ(parse_request(post + "Content-Length: 4194304\r\n\r\n").kind, Http_parse::Kind::incomplete);
}

TEST(Http, SerializesWithLengthAndClose) {
    const Http_response response{200, "text/plain; charset=utf-8", "ok\n", {}};
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                             "Content-Length: 3\r\nConnection: close\r\n\r\n";
    EXPECT_EQ(serialize(response, false), head + "ok\n");
    EXPECT_EQ(serialize(response, true), head) << "HEAD: same headers, no body";
    const Http_response denied{401, "application/json", "{}", {{"WWW-Authenticate", "Bearer"}}};
    EXPECT_EQ(serialize(denied, false),
              "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
              "WWW-Authenticate: Bearer\r\nConnection: close\r\n\r\n{}");
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

// Sends `parts` over one real TCP connection to 127.0.0.1:port, `pause`
// between them, and returns everything the server answered until it closed.
std::string exchange(std::uint16_t port, const std::vector<std::string>& parts,
                     std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
    const Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) return "connect failed";
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
    return "POST /control/configure HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t0ken\r\n"
           "Content-Type: application/json\r\nContent-Length: " +
           std::to_string(length) + "\r\n" + std::string(extra) + "\r\n";
}

TEST_F(Http_server_test, TakesACommandWithBodyAndTokenOverTcp) {
    ASSERT_NE(port(), 0);
    // The body arrives in pieces, after the head: the server waits for all of it.
    const std::vector<std::string> parts = {configure_head(configure_body.size()), configure_body.substr(0, 40),
                                            configure_body.substr(40)};
    const std::string reply = exchange(port(), parts, std::chrono::milliseconds(50));
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")) << reply;
    EXPECT_EQ(body_of(reply), "{\"state\":\"READY\",\"epoch\":4}\n");
    EXPECT_EQ(target_.commands(), std::vector<Command>{Command::configure});

    const std::string start =
        exchange(port(), {"POST /control/start HTTP/1.1\r\nAuthorization: Bearer t0ken\r\nContent-Length: 0\r\n\r\n"});
    EXPECT_TRUE(start.starts_with("HTTP/1.1 200 OK\r\n")) << start;
    EXPECT_EQ(target_.state(), Control_state::running);

    const std::string again = exchange(port(), {"POST /control/start HTTP/1.1\r\nAuthorization: Bearer t0ken\r\n\r\n"});
    EXPECT_TRUE(again.starts_with("HTTP/1.1 409 Conflict\r\n")) << again;
    EXPECT_EQ(body_of(again), R"({"error":"cannot start in state RUNNING; allowed: configure, pause, stop, reset",)"
                              R"("state":"RUNNING","allowed":["configure","pause","stop","reset"]})"
                              "\n");
}

TEST_F(Http_server_test, AnswersReadsAndRefusals) {
    const std::string status = exchange(port(), {"GET /status HTTP/1.1\r\nHost: x\r\n\r\n"});
    EXPECT_EQ(body_of(status), "{\"state\":\"NOT_READY\",\"epoch\":0}\n") << status;
    const std::string head = exchange(port(), {"HEAD /healthz HTTP/1.1\r\n\r\n"});
    EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK\r\n")) << head;
    EXPECT_EQ(body_of(head), "") << "HEAD: no body";

    const std::string wrong = exchange(port(), {"POST /control/reset HTTP/1.1\r\nAuthorization: Bearer nope\r\n\r\n"});
    EXPECT_TRUE(wrong.starts_with("HTTP/1.1 401 Unauthorized\r\n")) << wrong;
    EXPECT_NE(wrong.find("\r\nWWW-Authenticate: Bearer\r\n"), std::string::npos) << wrong;

    // Refused from the head alone, without waiting for the 5 MiB.
    const std::string big = exchange(port(), {configure_head(5 << 20), std::string(64 << 10, ' ')});
    EXPECT_TRUE(big.starts_with("HTTP/1.1 413 Content Too Large\r\n")) << big;

    const std::string garbage = exchange(port(), {"hello\r\n\r\n"});
    EXPECT_TRUE(garbage.starts_with("HTTP/1.1 400 Bad Request\r\n")) << garbage;
    EXPECT_TRUE(target_.commands().empty());
}

TEST_F(Http_server_test, SendsContinueWhenAsked) {
    // curl asks for this before sending a body over 1 KiB and waits a second without it.
    const Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port());
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
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
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 200 OK\r\n")) << reply;
}

TEST_F(Http_server_test, AStalledClientIsDroppedAndOthersServed) {
    // A client that sends a head promising a body and then nothing: dropped
    // after the body timeout, and the next client is served after it.
    const auto started = std::chrono::steady_clock::now();
    std::jthread stalled([&] { exchange(port(), {configure_head(100)}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string status = exchange(port(), {"GET /healthz HTTP/1.1\r\n\r\n"});
    EXPECT_TRUE(status.starts_with("HTTP/1.1 200 OK\r\n")) << status;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(4));
}

}  // namespace
}  // namespace eb
