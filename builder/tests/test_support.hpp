#pragma once

// Helpers for tests that use real sockets and real processes.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.hpp"

// make test sets EB_REQUIRE_ALL_TESTS: there a test that cannot run here (a
// tool, a device or a privilege missing) fails, naming what is missing;
// elsewhere it is skipped, saying why. `why` is streamed, as in
// EB_UNAVAILABLE("no " << tool). For gtest tests only.
#define EB_UNAVAILABLE(why)                                                                                    \
    do {                                                                                                       \
        if (::eb::test::all_tests_required())                                                                  \
            GTEST_FAIL() << why << " (EB_REQUIRE_ALL_TESTS is set, as make test does: every test must run)"; \
        else                                                                                                   \
            GTEST_SKIP() << why;                                                                               \
    } while (false)

namespace eb::test {

// Whether EB_REQUIRE_ALL_TESTS is set (EB_UNAVAILABLE).
bool all_tests_required();

// `count` distinct TCP ports that are free on 127.0.0.1 right now, held
// together while picking so none repeats. They lie below the kernel's
// ephemeral range, so the source port of some outgoing connection cannot take
// one before its listener binds (dozens of processes dialling each other at
// once, as the 64-unit tests do, would otherwise hit that).
std::vector<std::uint16_t> free_ports(std::size_t count);

// A TCP connection to 127.0.0.1:port, from `source` (another loopback
// address, e.g. "127.0.0.2", plays another client host); an empty Fd if
// none could be made.
Fd connect_to(std::uint16_t port, const char* source = nullptr);

struct Http_reply {
    int status = 0;
    std::string body;
};

// GET http://127.0.0.1:port/path over a real socket; nullopt if nobody answers.
std::optional<Http_reply> http_get(std::uint16_t port, std::string_view path);

// Fields of a flat JSON object such as the /status body.
std::optional<std::uint64_t> json_number(std::string_view json, std::string_view key);
std::optional<double> json_real(std::string_view json, std::string_view key);
std::optional<std::string> json_string(std::string_view json, std::string_view key);

// Evaluates `condition` every few milliseconds until it holds or `timeout`
// passes; returns whether it held.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// A program run as a child process with stdout and stderr going to a log
// file. Killed and reaped on destruction if still running.
class Child {
public:
    Child(const std::string& program, const std::vector<std::string>& args, std::string log_path);
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    ~Child();

    void signal(int signal_number);
    // The exit code once the child has exited (128 + signal if killed by
    // one), or nullopt if it is still running after `timeout`.
    std::optional<int> wait_exit(std::chrono::milliseconds timeout);
    // Sends `signal_number` over and over, as fast as it goes, until the
    // child exits or `timeout` passes (as a pod's programs get SIGTERM while
    // they already stop); then as wait_exit.
    std::optional<int> signal_until_exit(int signal_number, std::chrono::milliseconds timeout);
    std::string log() const;

private:
    pid_t pid_ = -1;
    std::optional<int> exit_code_;
    std::string log_path_;
};

// The eb-builder flags that pick the transport under test: --transport
// $EB_TEST_TRANSPORT when set (make test-verbs runs the process suites with
// verbs on a real device), nothing (TCP) otherwise; --data-threads
// $EB_TEST_DATA_THREADS when set (ctest's threads1.* and streams2.* runs),
// else the builder's default; --tcp-streams $EB_TEST_TCP_STREAMS when set
// (streams2.*); --receive-window $EB_TEST_RECEIVE_WINDOW when set
// (verbs.window1.*).
std::vector<std::string> transport_flags();
// Whether the process suites run over verbs (EB_TEST_TRANSPORT=verbs).
bool over_verbs();

// The counts of a unit's last log line, "stopped: B events built, I
// incomplete, M MEPs, Y bytes, D dropped ..."; nullopt without one.
struct Final_counts {
    std::uint64_t built = 0, incomplete = 0, meps = 0, bytes = 0, dropped = 0;
    std::uint64_t network_sent = 0, network_received = 0;  // what the transport counted
};
std::optional<Final_counts> final_counts(const std::string& log);

// A fresh directory for the current test's files.
std::string make_temp_dir();

}  // namespace eb::test
