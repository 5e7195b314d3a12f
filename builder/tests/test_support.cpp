#include "test_support.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <map>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "base/fd.hpp"

extern char** environ;

namespace eb::test {

bool all_tests_required() {
    const char* value = std::getenv("EB_REQUIRE_ALL_TESTS");
    return value != nullptr && *value != '\0';
}
namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    return address;
}

// Position just after "key": in `json`, or npos.
std::size_t value_position(std::string_view json, std::string_view key) {
    const std::string pattern = "\"" + std::string(key) + "\":";
    const std::size_t at = json.find(pattern);
    return at == std::string_view::npos ? at : at + pattern.size();
}

}  // namespace

std::vector<std::uint16_t> free_ports(std::size_t count) {
    std::uint16_t ephemeral_low = 32768;
    if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> ephemeral_low;
    // Tests run in parallel and bind their ports only after picking them, so
    // a port that is free now may be another test's in a moment. Picks are
    // recorded in a shared file under a lock, and a port handed out in the
    // last minute is not handed out again.
    const Fd lock(::open("/tmp/eb-test-ports", O_RDWR | O_CREAT | O_CLOEXEC, 0666));
    if (!lock || ::flock(lock.get(), LOCK_EX) != 0) throw std::runtime_error("free_ports: cannot lock /tmp/eb-test-ports");
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
    std::map<int, long long> recent;  // port -> when handed out
    {
        std::ifstream file("/tmp/eb-test-ports");
        int port;
        long long when;
        while (file >> port >> when)
            if (now - when < 60) recent[port] = when;
    }
    std::random_device random;
    std::uniform_int_distribution<int> start(10000, std::max(10001, ephemeral_low - 1000));
    std::vector<Fd> held;  // each port is checked by binding it, all held until all are found
    std::vector<std::uint16_t> ports;
    for (int port = start(random); ports.size() < count; ++port) {
        if (port >= ephemeral_low) port = 10000;
        if (recent.contains(port)) continue;
        Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in address = loopback(static_cast<std::uint16_t>(port));
        if (!fd) throw std::runtime_error("free_ports: cannot create a probe socket");
        if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) continue;
        ports.push_back(static_cast<std::uint16_t>(port));
        held.push_back(std::move(fd));
        recent[port] = now;
    }
    std::ofstream file("/tmp/eb-test-ports", std::ios::trunc);
    for (const auto& [port, when] : recent) file << port << " " << when << "\n";
    return ports;
}

Fd connect_to(std::uint16_t port, const char* source) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return Fd{};
    if (source != nullptr) {
        sockaddr_in from{};
        from.sin_family = AF_INET;
        if (::inet_pton(AF_INET, source, &from.sin_addr) != 1 ||
            ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0)
            return Fd{};
    }
    const sockaddr_in address = loopback(port);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) return Fd{};
    return fd;
}

std::optional<Http_reply> http_get(std::uint16_t port, std::string_view path) {
    const Fd fd = connect_to(port);
    if (!fd) return std::nullopt;
    const std::string request = "GET " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size()))
        return std::nullopt;

    std::string reply;
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < deadline) {
        pollfd watch{fd.get(), POLLIN, 0};
        if (::poll(&watch, 1, 100) <= 0) continue;
        char chunk[4096];
        const ssize_t got = ::recv(fd.get(), chunk, sizeof chunk, 0);
        if (got <= 0) break;  // closed: the request asked for it
        reply.append(chunk, static_cast<std::size_t>(got));
    }
    int status = 0;
    const std::size_t header_end = reply.find("\r\n\r\n");
    if (!reply.starts_with("HTTP/1.1 ") || header_end == std::string::npos ||
        std::from_chars(reply.data() + 9, reply.data() + reply.size(), status).ec != std::errc{})
        return std::nullopt;
    return Http_reply{status, reply.substr(header_end + 4)};
}

std::optional<std::uint64_t> json_number(std::string_view json, std::string_view key) {
    const std::size_t at = value_position(json, key);
    std::uint64_t value = 0;
    if (at == std::string_view::npos ||
        std::from_chars(json.data() + at, json.data() + json.size(), value).ec != std::errc{})
        return std::nullopt;
    return value;
}

std::optional<double> json_real(std::string_view json, std::string_view key) {
    const std::size_t at = value_position(json, key);
    double value = 0;
    if (at == std::string_view::npos ||
        std::from_chars(json.data() + at, json.data() + json.size(), value).ec != std::errc{})
        return std::nullopt;
    return value;
}

std::optional<std::string> json_string(std::string_view json, std::string_view key) {
    const std::size_t at = value_position(json, key);
    if (at == std::string_view::npos || at >= json.size() || json[at] != '"') return std::nullopt;
    const std::size_t end = json.find('"', at + 1);  // enough for the unescaped values tests read
    if (end == std::string_view::npos) return std::nullopt;
    return std::string(json.substr(at + 1, end - at - 1));
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!condition()) {
        if (Clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

Child::Child(const std::string& program, const std::vector<std::string>& args, std::string log_path)
    : log_path_(std::move(log_path)) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);

    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, STDERR_FILENO, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, STDERR_FILENO, STDOUT_FILENO);
    const int failed = ::posix_spawn(&pid_, program.c_str(), &files, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    if (failed != 0) throw std::runtime_error("cannot start " + program);
}

Child::~Child() {
    if (!wait_exit(std::chrono::milliseconds(0))) {
        ::kill(pid_, SIGKILL);
        wait_exit(std::chrono::seconds(10));
    }
}

void Child::signal(int signal_number) {
    if (!exit_code_) ::kill(pid_, signal_number);
}

std::optional<int> Child::wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!exit_code_) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_)
            exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        else if (Clock::now() >= deadline)
            break;
        else
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return exit_code_;
}

std::optional<int> Child::signal_until_exit(int signal_number, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!exit_code_ && Clock::now() < deadline) {
        for (int burst = 0; burst < 64; ++burst) ::kill(pid_, signal_number);
        // WNOWAIT leaves it a zombie, so its pid is not reused under the next kill.
        siginfo_t exited{};
        if (::waitid(P_PID, static_cast<id_t>(pid_), &exited, WEXITED | WNOHANG | WNOWAIT) == 0 && exited.si_pid == pid_)
            break;
    }
    return wait_exit(std::chrono::milliseconds(0));
}

std::string Child::log() const {
    std::ifstream file(log_path_);
    std::ostringstream text;
    text << file.rdbuf();
    return text.str();
}

std::string make_temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "eb-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    return pattern;
}

std::vector<std::string> transport_flags() {
    std::vector<std::string> flags;
    if (const char* transport = std::getenv("EB_TEST_TRANSPORT"); transport != nullptr && *transport != '\0')
        flags.insert(flags.end(), {"--transport", transport});
    if (const char* threads = std::getenv("EB_TEST_DATA_THREADS"); threads != nullptr && *threads != '\0')
        flags.insert(flags.end(), {"--data-threads", threads});
    if (const char* streams = std::getenv("EB_TEST_TCP_STREAMS"); streams != nullptr && *streams != '\0')
        flags.insert(flags.end(), {"--tcp-streams", streams});
    if (const char* window = std::getenv("EB_TEST_RECEIVE_WINDOW"); window != nullptr && *window != '\0')
        flags.insert(flags.end(), {"--receive-window", window});
    return flags;
}

bool over_verbs() {
    const char* transport = std::getenv("EB_TEST_TRANSPORT");
    return transport != nullptr && std::string_view(transport) == "verbs";
}

std::optional<Final_counts> final_counts(const std::string& log) {
    const std::size_t at = log.rfind("stopped: ");
    Final_counts counts;
    if (at == std::string::npos ||
        std::sscanf(log.c_str() + at, "stopped: %lu events built, %lu incomplete, %lu MEPs, %lu bytes, %lu dropped",
                    &counts.built, &counts.incomplete, &counts.meps, &counts.bytes, &counts.dropped) != 5)
        return std::nullopt;
    const std::size_t network = log.find(" s of building, ", at);
    if (network == std::string::npos ||
        std::sscanf(log.c_str() + network, " s of building, %lu bytes sent and %lu received over the network",
                    &counts.network_sent, &counts.network_received) != 2)
        return std::nullopt;
    return counts;
}

}  // namespace eb::test
