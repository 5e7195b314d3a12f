#include "tcp_transport.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "local_mesh.hpp"
#include "schedule.hpp"

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

}  // namespace
}  // namespace eb
