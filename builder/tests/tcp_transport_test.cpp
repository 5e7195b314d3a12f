#include "tcp_transport.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <cstring>

#include <memory>
#include <thread>
#include <vector>

#include "local_mesh.hpp"
#include "schedule.hpp"
#include "socket.hpp"
#include "tcp_mesh.hpp"
#include "test_support.hpp"
#include "wire_format.hpp"

namespace eb {
namespace {

// Message from `sender` in `phase`: its size and every byte depend on both,
// and it is larger than socket buffers, so sends complete in several pieces.
std::vector<std::byte> message(Rank sender, Rank phase) {
    std::vector<std::byte> bytes(3'000'000 + 1000 * sender + phase);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(i * 7 + sender * 31 + phase);
    return bytes;
}

std::vector<std::unique_ptr<Tcp_transport>> transports(Rank units, const Stop_flag& stop) {
    std::vector<std::unique_ptr<Tcp_transport>> made;
    auto meshes = test::connect_local_mesh(units, stop);
    for (Rank rank = 0; rank < units; ++rank)
        made.push_back(std::make_unique<Tcp_transport>(rank, std::move(meshes[rank]), stop));
    return made;
}

TEST(TcpTransport, LinearShiftingDeliversEveryMessageIntact) {
    constexpr Rank units = 3;
    Stop_flag stop;
    auto mesh = transports(units, stop);
    std::vector<int> failures(units, 0);
    {
        std::vector<std::jthread> threads;
        for (Rank rank = 0; rank < units; ++rank) {
            threads.emplace_back([&, rank] {
                for (Rank phase = 0; phase < units; ++phase) {
                    const std::vector<std::byte> out = message(rank, phase);
                    const Rank from = receive_source(rank, phase, units);
                    std::vector<std::byte> in(message(from, phase).size());
                    const Send send{send_target(rank, phase, units), out};
                    const Receive receive{from, in};
                    if (!mesh[rank]->transfer({&send, 1}, {&receive, 1}) || in != message(from, phase))
                        ++failures[rank];
                }
            });
        }
    }
    EXPECT_EQ(failures, std::vector<int>(units, 0));
}

TEST(TcpTransport, AllToAllOfSmallMessagesCompletes) {
    constexpr Rank units = 4;
    Stop_flag stop;
    auto mesh = transports(units, stop);
    std::vector<std::vector<std::uint64_t>> received(units, std::vector<std::uint64_t>(units));
    {
        std::vector<std::jthread> threads;
        for (Rank rank = 0; rank < units; ++rank) {
            threads.emplace_back([&, rank] {
                std::vector<std::uint64_t> out(units);
                std::vector<Send> sends;
                std::vector<Receive> receives;
                for (Rank peer = 0; peer < units; ++peer) {
                    out[peer] = 100 * rank + peer;  // "from rank to peer"
                    sends.push_back({peer, std::as_bytes(std::span(&out[peer], 1))});
                    receives.push_back({peer, std::as_writable_bytes(std::span(&received[rank][peer], 1))});
                }
                mesh[rank]->transfer(sends, receives);
            });
        }
    }
    for (Rank rank = 0; rank < units; ++rank)
        for (Rank peer = 0; peer < units; ++peer) EXPECT_EQ(received[rank][peer], 100 * peer + rank);
}

TEST(TcpTransport, ReportsAPeerThatClosed) {
    Stop_flag stop;
    auto mesh = transports(2, stop);
    mesh[1].reset();  // rank 1 goes away
    std::vector<std::byte> in(64);
    const Receive receive{1, in};
    try {
        mesh[0]->transfer({}, {&receive, 1});
        FAIL() << "expected a Transport_error";
    } catch (const Transport_error& error) {
        EXPECT_NE(std::string(error.what()).find("rank 1 closed"), std::string::npos) << error.what();
    }
}

TEST(TcpTransport, StopEndsATransferThatCannotComplete) {
    Stop_flag stop;
    auto mesh = transports(2, stop);
    std::vector<std::byte> in(64);
    const Receive receive{1, in};  // rank 1 never sends
    std::jthread stopper([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // lets it block; either order is correct
        stop.request();
    });
    EXPECT_FALSE(mesh[0]->transfer({}, {&receive, 1}));
}

TEST(TcpTransport, SelfMessagesNeedBothSidesOfTheSameSize) {
    Stop_flag stop;
    Tcp_transport alone(0, Tcp_mesh{std::vector<Fd>(1), std::vector<Fd>(1)}, stop);
    std::vector<std::byte> out(8, std::byte{5}), in(8), short_in(4);
    const Send send{0, out};
    const Receive receive{0, in}, short_receive{0, short_in};
    EXPECT_TRUE(alone.transfer({&send, 1}, {&receive, 1}));
    EXPECT_EQ(in, out);
    EXPECT_THROW(alone.transfer({&send, 1}, {}), std::logic_error);
    EXPECT_THROW(alone.transfer({&send, 1}, {&short_receive, 1}), std::logic_error);
    EXPECT_THROW(alone.transfer({}, {{Receive{1, in}}}), std::out_of_range);
}

int socket_option(int fd, int level, int name) {
    int value = -1;
    socklen_t length = sizeof value;
    EXPECT_EQ(::getsockopt(fd, level, name, &value, &length), 0);
    return value;
}

// A lost peer host must end in ETIMEDOUT, not in a poll() that never returns.
TEST(TcpSocket, DataSocketsProbeAndTimeOutASilentPeer) {
    const Fd fd = tcp_socket();
    tune_data_socket(fd.get());
    EXPECT_NE(socket_option(fd.get(), SOL_SOCKET, SO_KEEPALIVE), 0);
    EXPECT_EQ(socket_option(fd.get(), IPPROTO_TCP, TCP_KEEPIDLE), 5);
    EXPECT_EQ(socket_option(fd.get(), IPPROTO_TCP, TCP_KEEPINTVL), 1);
    EXPECT_EQ(socket_option(fd.get(), IPPROTO_TCP, TCP_KEEPCNT), 5);
    EXPECT_EQ(socket_option(fd.get(), IPPROTO_TCP, TCP_USER_TIMEOUT), 10000);
}

// Waits up to 5 s for `fd` to be ready for `events`.
bool ready(int fd, short events) {
    pollfd watch{fd, events, 0};
    return ::poll(&watch, 1, 5000) == 1;
}

// A stand-in for a peer process, built from raw sockets: accepts the unit's
// dial and reads its hello, and dials the unit with a hello of its own.
struct Hello_bytes {
    std::uint32_t magic = 0x4C484245;  // "EBHL"
    std::uint16_t version = wire_version;
    std::uint16_t reserved = 0;
    std::uint32_t rank;
    std::uint32_t units;
};

Fd accept_dial(const Fd& listener, std::uint32_t expected_rank) {
    if (!ready(listener.get(), POLLIN)) return Fd();
    Fd fd(::accept(listener.get(), nullptr, nullptr));
    Hello_bytes hello{};
    std::size_t got = 0;
    while (fd && got < sizeof hello && ready(fd.get(), POLLIN)) {
        const ssize_t n = ::recv(fd.get(), reinterpret_cast<char*>(&hello) + got, sizeof hello - got, 0);
        if (n <= 0) return Fd();
        got += static_cast<std::size_t>(n);
    }
    if (got != sizeof hello || hello.rank != expected_rank) return Fd();
    return fd;
}

Fd dial_in(std::uint16_t port, std::uint32_t rank, std::uint32_t units) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) return Fd();
    const Hello_bytes hello{.rank = rank, .units = units};
    if (::send(fd.get(), &hello, sizeof hello, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof hello)) return Fd();
    return fd;
}

// Rank 1 connects both ways, then restarts while rank 0 still waits for
// rank 2: rank 0 must dial the new rank 1 instead of keeping its dead link.
TEST(TcpMesh, APeerThatRestartsWhileConnectingIsDialledAgain) {
    const std::vector<std::uint16_t> ports = test::free_ports(3);  // rank 2 never starts
    std::vector<Peer_address> peers;
    for (const std::uint16_t port : ports) peers.push_back({"127.0.0.1", port});
    Stop_flag stop;
    Fd old_listener = listen_for_peers(ports[1]);
    std::jthread unit([&, listener = listen_for_peers(ports[0])]() mutable {
        connect_mesh(std::move(listener), 0, peers, {}, stop);
    });

    Fd old_in = accept_dial(old_listener, 0);
    ASSERT_TRUE(old_in) << "rank 0 never dialled the first rank 1";
    Fd old_out = dial_in(ports[0], 1, 3);
    ASSERT_TRUE(old_out);

    // The first rank 1 dies; the second one starts and dials in.
    old_in.reset();
    old_out.reset();
    old_listener.reset();
    const Fd new_listener = listen_for_peers(ports[1]);
    const Fd new_out = dial_in(ports[0], 1, 3);
    ASSERT_TRUE(new_out);
    const Fd new_in = accept_dial(new_listener, 0);
    EXPECT_TRUE(new_in) << "rank 0 did not dial the restarted rank 1";
    stop.request();
}

}  // namespace
}  // namespace eb
