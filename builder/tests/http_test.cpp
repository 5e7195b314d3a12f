#include "http.hpp"

#include <gtest/gtest.h>

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

TEST(Http, RoutesTheEndpoints) {
    Status_snapshot status;
    status.rank = 1;
    status.units = 3;
    status.state = Unit_state::running;
    struct Case {
        std::string_view method, path;
        int code;
        std::string_view content_type, body_start;
    };
    const Case cases[] = {
        {"GET", "/status", 200, "application/json", "{\"rank\":1,\"units\":3,\"state\":\"RUNNING\""},
        {"GET", "/metrics", 200, "text/plain; version=0.0.4; charset=utf-8", "# HELP eb_events_built_total"},
        {"GET", "/healthz", 200, "text/plain; charset=utf-8", "ok"},
        {"HEAD", "/healthz", 200, "text/plain; charset=utf-8", "ok"},
        {"GET", "/", 404, "text/plain; charset=utf-8", "not found"},
        {"GET", "/status/", 404, "text/plain; charset=utf-8", "not found"},
        {"POST", "/status", 405, "text/plain; charset=utf-8", "only GET"},
    };
    for (const auto& c : cases) {
        const Http_response response = respond({c.method, c.path}, status);
        EXPECT_EQ(response.status, c.code) << c.method << " " << c.path;
        EXPECT_EQ(response.content_type, c.content_type) << c.path;
        EXPECT_TRUE(response.body.starts_with(c.body_start)) << response.body;
    }
}

TEST(Http, SerializesWithLengthAndClose) {
    const Http_response response{200, "text/plain; charset=utf-8", "ok\n"};
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                             "Content-Length: 3\r\nConnection: close\r\n\r\n";
    EXPECT_EQ(serialize(response, false), head + "ok\n");
    EXPECT_EQ(serialize(response, true), head) << "HEAD: same headers, no body";
    EXPECT_NE(serialize({405, "text/plain", ""}, false).find("\r\nAllow: GET, HEAD\r\n"), std::string::npos);
}

}  // namespace
}  // namespace eb
