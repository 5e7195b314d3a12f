#include "transport/tcp/tcp_transport.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <array>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "transport/tcp/heartbeat.hpp"
#include "local_mesh.hpp"
#include "schedule/schedule.hpp"
#include "base/socket.hpp"
#include "socket_bytes.hpp"
#include "transport/tcp/tcp_mesh.hpp"
#include "test_support.hpp"
#include "formats/wire_format.hpp"

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

// A peer that goes away is no error: the transport marks it lost, tells the
// observer once, drops its operations and completes the others.
TEST(TcpTransport, ReportsAPeerThatClosed) {
    constexpr Rank units = 3;
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(units, stop);
    struct Loss {
        Rank peer;
        Link_failure failure;
        std::string detail;
    };
    std::vector<Loss> losses;
    Tcp_transport unit(0, std::move(meshes[0]), stop,
                       [&](Rank peer, Link_failure failure, const std::string& detail) {
                           losses.push_back({peer, failure, detail});
                       });
    auto alive = std::make_unique<Tcp_transport>(2, std::move(meshes[2]), stop);
    meshes[1] = Tcp_mesh{};  // rank 1 goes away: its connections close

    // Rank 0 waits for rank 1 and exchanges with rank 2 in the same transfer;
    // the messages to and from rank 2 are larger than the socket buffers.
    const std::vector<std::byte> to_two = message(0, 1), from_two = message(2, 1);
    std::vector<std::byte> from_one(64), got_from_two(from_two.size()), got_at_two(to_two.size());
    const std::vector<Send> sends = {{2, to_two}};
    const std::vector<Receive> receives = {{1, from_one}, {2, got_from_two}};
    bool two_done = false;
    {
        std::jthread two([&] {
            const Send send{0, from_two};
            const Receive receive{0, got_at_two};
            two_done = alive->transfer({&send, 1}, {&receive, 1});
        });
        EXPECT_TRUE(unit.transfer(sends, receives));
    }
    EXPECT_TRUE(two_done);
    EXPECT_EQ(got_from_two, from_two) << "the transfer with rank 2 completed intact";
    EXPECT_EQ(got_at_two, to_two);
    EXPECT_TRUE(unit.lost(1));
    EXPECT_FALSE(unit.lost(2));
    ASSERT_EQ(losses.size(), 1u);
    EXPECT_EQ(losses[0].peer, 1u);
    // A socket closed with bytes unread (rank 0's heartbeats) resets the
    // connection instead of closing it: either is the process gone.
    if (losses[0].failure == Link_failure::closed) {
        EXPECT_NE(losses[0].detail.find("closed"), std::string::npos) << losses[0].detail;
    } else {
        EXPECT_EQ(losses[0].failure, Link_failure::reset);
        EXPECT_EQ(link_failure_name(losses[0].failure), "reset");
    }

    // Later transfers skip the lost peer, send or receive, and tell nobody again.
    std::uint64_t token_out = 7, token_in = 0, token_at_two = 0;
    const std::vector<Send> both = {{1, std::as_bytes(std::span(&token_out, 1))},
                                    {2, std::as_bytes(std::span(&token_out, 1))}};
    const std::vector<Receive> only_one = {{1, std::as_writable_bytes(std::span(&token_in, 1))}};
    {
        std::jthread two([&] {
            const Receive receive{0, std::as_writable_bytes(std::span(&token_at_two, 1))};
            alive->transfer({}, {&receive, 1});
        });
        EXPECT_TRUE(unit.transfer(both, only_one));
    }
    EXPECT_EQ(token_at_two, 7u);
    EXPECT_EQ(token_in, 0u) << "nothing is read from a lost peer";
    EXPECT_EQ(losses.size(), 1u);
}

// Data operations waited for together are dealt out over the data threads
// (Data_threads): every unit sends to and receives from every other at once,
// with more operations than threads, messages larger than socket buffers.
// Three rounds of all-to-all data among `units` units, each with
// `data_threads` threads and `streams` connections per peer and direction:
// every message arrives intact and each byte is counted once on each side.
// Returns the transports, for a look at their connections.
std::vector<std::unique_ptr<Tcp_transport>> exchange_all_to_all(Rank units, unsigned data_threads, unsigned streams,
                                                                 std::vector<std::unique_ptr<Data_threads>>& pools) {
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(units, stop, {}, streams);
    std::vector<std::unique_ptr<Tcp_transport>> mesh;
    std::vector<Data_traffic> traffic(units);
    for (Rank rank = 0; rank < units; ++rank) {
        pools.push_back(std::make_unique<Data_threads>(data_threads, Busy_poll(std::chrono::microseconds(100))));
        mesh.push_back(std::make_unique<Tcp_transport>(rank, std::move(meshes[rank]), stop, Mesh_transport::Loss_observer{},
                                                       Liveness{}, Busy_poll(std::chrono::microseconds(100)),
                                                       pools.back().get()));
        mesh[rank]->count_traffic(traffic[rank]);
    }
    std::vector<int> failures(units, 0);
    std::vector<std::uint64_t> sent(units, 0);
    {
        std::vector<std::jthread> threads;
        for (Rank rank = 0; rank < units; ++rank) {
            threads.emplace_back([&, rank] {
                for (Rank round = 0; round < 3; ++round) {
                    std::vector<std::vector<std::byte>> out(units), in(units);
                    std::vector<Send> sends;
                    std::vector<Receive> receives;
                    std::vector<Rank> peers;
                    for (Rank peer = 0; peer < units; ++peer) {
                        if (peer == rank) continue;
                        out[peer] = message(rank, peer + round);
                        in[peer].resize(message(peer, rank + round).size());
                        sends.push_back({peer, out[peer]});
                        receives.push_back({peer, in[peer]});
                        peers.push_back(peer);
                        sent[rank] += out[peer].size();
                    }
                    mesh[rank]->post_data(sends, receives);
                    if (!mesh[rank]->wait_data(peers, peers)) ++failures[rank];
                    for (const Rank peer : peers)
                        if (in[peer] != message(peer, rank + round)) ++failures[rank];
                }
            });
        }
    }
    EXPECT_EQ(failures, std::vector<int>(units, 0));
    for (Rank rank = 0; rank < units; ++rank) EXPECT_EQ(traffic[rank].bytes_sent.load(), sent[rank]) << "rank " << rank;
    std::uint64_t all_sent = 0, all_received = 0;
    for (Rank rank = 0; rank < units; ++rank) {
        all_sent += traffic[rank].bytes_sent.load();
        all_received += traffic[rank].bytes_received.load();
    }
    EXPECT_EQ(all_received, all_sent) << "every byte counted once on each side";
    return mesh;
}

TEST(TcpTransport, DataThreadsMoveEveryMessageIntactAndCountEachByteOnce) {
    std::vector<std::unique_ptr<Data_threads>> pools;
    exchange_all_to_all(4, 4, 1, pools);
}

// With S streams, a message of 3 MB goes in S slices, each over its own
// connection: every connection of every peer carries about a third of it,
// on one data thread or several.
TEST(TcpTransport, StreamsCarrySlicesOfEachMessageOnEveryConnection) {
    constexpr Rank units = 3;
    for (const auto& [threads, streams] : {std::pair{1u, 3u}, {2u, 3u}, {4u, 2u}}) {
        SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(streams) + " streams");
        std::vector<std::unique_ptr<Data_threads>> pools;
        const auto mesh = exchange_all_to_all(units, threads, streams, pools);
        for (Rank rank = 0; rank < units; ++rank) {
            const Tcp_mesh& connections = mesh[rank]->mesh();
            ASSERT_EQ(connections.streams, streams);
            ASSERT_EQ(connections.more_from.size(), std::size_t{units} * (streams - 1));
            for (Rank peer = 0; peer < units; ++peer) {
                if (peer == rank) continue;
                // Three rounds of about 3 MB each, sliced S ways.
                const std::uint64_t slice_bytes = 3 * 3'000'000ull / streams;
                EXPECT_GE(test::bytes_received(connections.from[peer].get()), slice_bytes * 9 / 10)
                    << "rank " << rank << " from " << peer << ", stream 0";
                for (unsigned stream = 1; stream < streams; ++stream) {
                    const int fd = connections.from_stream(peer, stream).get();
                    EXPECT_GE(test::bytes_received(fd), slice_bytes * 9 / 10)
                        << "rank " << rank << " from " << peer << ", stream " << stream;
                    EXPECT_LE(test::bytes_received(fd), slice_bytes * 11 / 10)
                        << "rank " << rank << " from " << peer << ", stream " << stream << ": data alone";
                }
            }
        }
    }
}

// A message smaller than S slices of min_slice_bytes goes whole on the
// first stream; the others carry nothing.
TEST(TcpTransport, AMessageTooSmallToSliceGoesWholeOnTheFirstStream) {
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(2, stop, {}, 2);
    Tcp_transport zero(0, std::move(meshes[0]), stop), one(1, std::move(meshes[1]), stop);
    std::vector<std::byte> out(2 * Tcp_transport::min_slice_bytes - 1, std::byte{7}), in(out.size());
    const Rank to_one = 1, from_zero = 0;
    // Each connection opened with a hello and its proof.
    const std::uint64_t first_before = test::bytes_received(one.mesh().from[0].get());
    const std::uint64_t second_before = test::bytes_received(one.mesh().from_stream(0, 1).get());
    {
        std::jthread receiver([&] {
            const Receive receive{0, in};
            one.post_data({}, {&receive, 1});
            EXPECT_TRUE(one.wait_data({}, {&from_zero, 1}));
        });
        const Send send{1, out};
        zero.post_data({&send, 1}, {});
        EXPECT_TRUE(zero.wait_data({&to_one, 1}, {}));
    }
    EXPECT_EQ(in, out);
    EXPECT_EQ(test::bytes_received(one.mesh().from[0].get()) - first_before, out.size());
    EXPECT_EQ(test::bytes_received(one.mesh().from_stream(0, 1).get()) - second_before, 0u);
}

// A peer that goes away while several data threads wait on it and on others:
// lost once, observer told once on the calling thread, the rest completes.
TEST(TcpTransport, APeerLostUnderDataThreadsIsLostOnceAndTheOthersComplete) {
    constexpr Rank units = 4;
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(units, stop);
    std::vector<Rank> lost_peers;
    std::vector<std::thread::id> told_on;
    Data_threads threads(4, Busy_poll(std::chrono::microseconds(0)));
    Tcp_transport unit(
        0, std::move(meshes[0]), stop,
        [&](Rank peer, Link_failure, const std::string&) {
            lost_peers.push_back(peer);
            told_on.push_back(std::this_thread::get_id());
        },
        Liveness{}, Busy_poll(std::chrono::microseconds(0)), &threads);
    std::vector<std::unique_ptr<Tcp_transport>> alive;
    for (Rank rank : {2u, 3u}) alive.push_back(std::make_unique<Tcp_transport>(rank, std::move(meshes[rank]), stop));
    meshes[1] = Tcp_mesh{};  // rank 1 goes away: its connections close

    std::vector<std::vector<std::byte>> in(units);
    std::vector<Receive> receives;
    for (Rank peer = 1; peer < units; ++peer) {
        in[peer].resize(message(peer, 0).size());
        receives.push_back({peer, in[peer]});
    }
    const std::vector<std::byte> out = message(0, 0);
    const std::vector<Send> sends = {{1, out}, {2, out}, {3, out}};
    const std::vector<Rank> peers = {1, 2, 3};
    std::vector<std::vector<std::byte>> got(units, std::vector<std::byte>(out.size()));
    {
        std::vector<std::jthread> others;
        for (std::size_t index = 0; index < alive.size(); ++index)
            others.emplace_back([&, index] {
                Tcp_transport& other = *alive[index];
                const Rank rank = other.rank();
                const std::vector<std::byte> mine = message(rank, 0);
                const Send send{0, mine};
                const Receive receive{0, got[rank]};
                other.post_data({&send, 1}, {&receive, 1});
                const Rank zero = 0;
                other.wait_data({&zero, 1}, {&zero, 1});
            });
        unit.post_data(sends, receives);
        EXPECT_TRUE(unit.wait_data(peers, peers));
    }
    EXPECT_TRUE(unit.lost(1));
    EXPECT_EQ(lost_peers, std::vector<Rank>{1});
    EXPECT_EQ(told_on, std::vector<std::thread::id>{std::this_thread::get_id()}) << "on the transferring thread";
    for (Rank peer : {2u, 3u}) {
        EXPECT_FALSE(unit.lost(peer));
        EXPECT_EQ(in[peer], message(peer, 0)) << "from rank " << peer;
        EXPECT_EQ(got[peer], out) << "at rank " << peer;
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

// A set-up exchange with a peer that never answers (it does not speak the
// protocol) ends at its deadline with that peer lost as timed out.
TEST(TcpTransport, ATransferWithADeadlineLosesThePeersNotDoneByThen) {
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(2, stop);
    std::vector<std::pair<Link_failure, std::string>> losses;
    Tcp_transport transport(0, std::move(meshes[0]), stop, [&](Rank, Link_failure failure, const std::string& detail) {
        losses.emplace_back(failure, detail);
    });
    std::vector<std::byte> in(64);
    const Receive receive{1, in};  // rank 1 never sends
    const auto start = Tcp_transport::Clock::now();
    EXPECT_TRUE(transport.transfer_until(
        {}, {&receive, 1}, {start + std::chrono::milliseconds(200), Link_failure::join_timeout, "no addresses"}));
    EXPECT_GE(Tcp_transport::Clock::now() - start, std::chrono::milliseconds(200));
    EXPECT_TRUE(transport.lost(1));
    ASSERT_EQ(losses.size(), 1u);
    EXPECT_EQ(losses[0].first, Link_failure::join_timeout) << "lost as the caller says: a join that timed out";
    EXPECT_EQ(losses[0].second, "no addresses");
}

// A peer process that is stopped (SIGSTOP) or hung keeps its connections
// up: its kernel acknowledges. Here rank 1 is such a process: its sockets
// stay open while nothing in it runs, first with its heartbeat going, then
// without. Rank 0 waits for it while it beats, and loses it once it has been
// silent for the peer timeout.
TEST(TcpTransport, APeerWhoseProcessFallsSilentIsLostWithinThePeerTimeout) {
    using namespace std::chrono_literals;
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(2, stop);
    std::vector<std::pair<Link_failure, std::string>> losses;
    Tcp_transport transport(0, std::move(meshes[0]), stop,
                            [&](Rank, Link_failure failure, const std::string& detail) {
                                losses.emplace_back(failure, detail);
                            },
                            Liveness{200ms, 2s});
    auto beating = std::make_unique<Heartbeat>(2, 50ms);
    beating->watch(0, meshes[1].to[0].get(), meshes[1].from[0].get());

    std::vector<std::byte> in(64);
    const Receive receive{1, in};  // rank 1 never sends data
    std::jthread falls_silent([&] {
        std::this_thread::sleep_for(1s);  // five peer timeouts of waiting, beating
        beating.reset();                  // its connections stay open
    });
    const auto start = Tcp_transport::Clock::now();
    EXPECT_TRUE(transport.transfer({}, {&receive, 1}));
    const auto waited = Tcp_transport::Clock::now() - start;
    EXPECT_GE(waited, 1s) << "not lost while it beat";
    EXPECT_LT(waited, 1s + 200ms + 500ms) << "lost within the peer timeout of its last beat (and some slack)";
    EXPECT_TRUE(transport.lost(1));
    ASSERT_EQ(losses.size(), 1u);
    EXPECT_EQ(losses[0].first, Link_failure::timeout);
    EXPECT_NE(losses[0].second.find("no sign of life from its process for"), std::string::npos) << losses[0].second;
}

// A peer never heard from since it connected may still be connecting to
// others: it gets the longer first-sign timeout, then is lost all the same.
TEST(TcpTransport, APeerNeverHeardFromIsLostAfterTheFirstSignTimeout) {
    using namespace std::chrono_literals;
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(2, stop);
    std::vector<std::string> losses;
    Tcp_transport transport(0, std::move(meshes[0]), stop,
                            [&](Rank, Link_failure, const std::string& detail) { losses.push_back(detail); },
                            Liveness{100ms, 600ms});
    std::vector<std::byte> in(64);
    const Receive receive{1, in};  // rank 1 (its raw sockets) never beats nor sends
    const auto start = Tcp_transport::Clock::now();
    EXPECT_TRUE(transport.transfer({}, {&receive, 1}));
    EXPECT_GE(Tcp_transport::Clock::now() - start, 600ms);
    ASSERT_EQ(losses.size(), 1u);
    EXPECT_NE(losses[0].find("since it connected"), std::string::npos) << losses[0];
}

// Data arriving is a sign of life as good as a beat: a peer that sends and
// sends, its heartbeat late (a starved thread), is not lost.
TEST(TcpTransport, DataFromAPeerKeepsItAliveWithoutBeats) {
    using namespace std::chrono_literals;
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(2, stop);
    Tcp_transport transport(0, std::move(meshes[0]), stop, {}, Liveness{100ms, 100ms});
    Fd sender = std::move(meshes[1].to[0]);  // raw: no heartbeat on rank 1's side
    std::vector<std::byte> in(2000);
    const Receive receive{1, in};
    std::jthread trickle([&] {
        for (int piece = 0; piece < 20; ++piece) {  // 100 bytes every 40 ms: 800 ms in all
            std::this_thread::sleep_for(40ms);
            const std::vector<std::byte> bytes(100, std::byte(piece));
            ASSERT_EQ(::send(sender.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), 100);
        }
    });
    EXPECT_TRUE(transport.transfer({}, {&receive, 1}));
    EXPECT_FALSE(transport.lost(1));
    EXPECT_EQ(in[1999], std::byte(19));
}

TEST(TcpTransport, SelfMessagesNeedBothSidesOfTheSameSize) {
    Stop_flag stop;
    Tcp_transport alone(0, Tcp_mesh::empty(1), stop);
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

// A lost peer host must end in ETIMEDOUT within --peer-timeout-ms (default
// 1 s), not in a poll() that never returns: idle connections are probed after
// 1 s, every 1 s, 3 times, and unacknowledged data or probes time out.
TEST(TcpSocket, DataSocketsProbeAndTimeOutASilentPeer) {
    const Fd fd = tcp_socket();
    tune_data_socket(fd.get());
    EXPECT_NE(socket_option(fd.get(), SOL_SOCKET, SO_KEEPALIVE), 0);
    EXPECT_EQ(socket_option(fd.get(), IPPROTO_TCP, TCP_KEEPIDLE), 1);
    EXPECT_EQ(socket_option(fd.get(), IPPROTO_TCP, TCP_KEEPINTVL), 1);
    EXPECT_EQ(socket_option(fd.get(), IPPROTO_TCP, TCP_KEEPCNT), 3);
    EXPECT_EQ(socket_option(fd.get(), IPPROTO_TCP, TCP_USER_TIMEOUT), 1000);
    EXPECT_EQ(default_peer_timeout_ms, 1000);

    // --peer-timeout-ms sets the user timeout of each data socket.
    const Fd tuned = tcp_socket();
    tune_data_socket(tuned.get(), 2500);
    EXPECT_EQ(socket_option(tuned.get(), IPPROTO_TCP, TCP_USER_TIMEOUT), 2500);
    EXPECT_EQ(socket_option(tuned.get(), IPPROTO_TCP, TCP_KEEPIDLE), 1);
}

// Waits up to 5 s for `fd` to be ready for `events`.
bool ready(int fd, short events) {
    pollfd watch{fd, events, 0};
    return ::poll(&watch, 1, 5000) == 1;
}

// A stand-in for a peer process, built from raw sockets: accepts the unit's
// dial and reads its hello, and dials the unit with a hello of its own. The
// The acceptor sends a 16-byte nonce; the dialler answers with a hello of 40
// bytes (tcp_mesh.cpp): magic, mesh protocol version 9, flags
// (1: in session), rank, units, rank table epoch, stream, streams, next
// chunk, cycles done.
struct Hello_bytes {
    std::uint32_t magic = 0x4C484245;  // "EBHL"
    std::uint16_t version = 9;
    std::uint16_t flags = 0;
    std::uint32_t rank = 0;
    std::uint32_t units = 0;
    std::uint32_t epoch = 1;  // connect_mesh() runs at epoch 1
    std::uint16_t stream = 0;
    std::uint16_t streams = 1;
    std::uint64_t next_chunk = 0;
    std::uint64_t cycles_done = 0;
};
static_assert(sizeof(Hello_bytes) == 40);

// The addresses of units on loopback at `ports`, in rank order.
std::vector<Peer_address> loopback_peers(const std::vector<std::uint16_t>& ports) {
    std::vector<Peer_address> peers;
    for (const std::uint16_t port : ports) peers.push_back({"127.0.0.1", port});
    return peers;
}

// Asks a test's stop once it ends, also when an assertion returns early, so
// its unit thread ends and can be joined.
struct Stop_on_exit {
    Stop_flag& stop;
    ~Stop_on_exit() { stop.request(); }
};

// Takes a unit's dial: sends a nonce, reads its hello and proof (checked
// against `key`); answers 'A' (taken) if `take`, else leaves the answer to
// the caller.
Fd accept_dial(const Fd& listener, std::uint32_t expected_rank, std::uint32_t expected_epoch = 1, bool take = true,
               const Data_key& key = Data_key()) {
    if (!ready(listener.get(), POLLIN)) return Fd();
    Fd fd(::accept(listener.get(), nullptr, nullptr));
    const Data_key::Nonce nonce = Data_key::fresh_nonce();
    if (::send(fd.get(), nonce.data(), nonce.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(nonce.size())) return Fd();
    std::array<std::byte, sizeof(Hello_bytes) + Data_key::mac_bytes> message{};
    std::size_t got = 0;
    while (fd && got < message.size() && ready(fd.get(), POLLIN)) {
        const ssize_t n = ::recv(fd.get(), message.data() + got, message.size() - got, 0);
        if (n <= 0) return Fd();
        got += static_cast<std::size_t>(n);
    }
    Hello_bytes hello{};
    std::memcpy(&hello, message.data(), sizeof hello);
    Data_key::Mac proof{};
    std::memcpy(proof.data(), message.data() + sizeof hello, proof.size());
    if (got != message.size() || hello.magic != Hello_bytes{}.magic || hello.version != Hello_bytes{}.version ||
        hello.rank != expected_rank || hello.epoch != expected_epoch ||
        !key.verify(nonce, std::span(message).first(sizeof hello), proof))
        return Fd();
    const char taken = 'A';
    if (take && ::send(fd.get(), &taken, 1, MSG_NOSIGNAL) != 1) return Fd();
    return fd;
}

// Dials a unit as `rank`: takes its nonce, sends the hello and the proof
// made with `key` (or `proof`, if given: a recorded one).
Fd dial_in(std::uint16_t port, std::uint32_t rank, std::uint32_t units, std::uint32_t epoch = 1,
           bool in_session = false, const Data_key& key = Data_key(),
           std::optional<Data_key::Mac> proof = std::nullopt, Data_key::Nonce* nonce_seen = nullptr,
           std::uint16_t stream = 0, std::uint16_t streams = 1, std::uint16_t version = Hello_bytes{}.version) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) return Fd();
    Data_key::Nonce nonce{};
    std::size_t got = 0;
    while (got < nonce.size() && ready(fd.get(), POLLIN)) {
        const ssize_t n = ::recv(fd.get(), nonce.data() + got, nonce.size() - got, 0);
        if (n <= 0) return Fd();
        got += static_cast<std::size_t>(n);
    }
    if (got != nonce.size()) return Fd();
    if (nonce_seen != nullptr) *nonce_seen = nonce;
    const Hello_bytes hello{.version = version, .flags = static_cast<std::uint16_t>(in_session ? 1 : 0), .rank = rank, .units = units,
                            .epoch = epoch, .stream = stream, .streams = streams};
    std::array<std::byte, sizeof hello + Data_key::mac_bytes> message{};
    std::memcpy(message.data(), &hello, sizeof hello);
    const Data_key::Mac mac = proof ? *proof : key.prove(nonce, std::span(message).first(sizeof hello));
    std::memcpy(message.data() + sizeof hello, mac.data(), mac.size());
    if (::send(fd.get(), message.data(), message.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(message.size()))
        return Fd();
    return fd;
}

// Rank 1 connects both ways, then restarts while rank 0 still waits for
// rank 2: rank 0 must dial the new rank 1 instead of keeping its dead link.
TEST(TcpMesh, APeerThatRestartsWhileConnectingIsDialledAgain) {
    const std::vector<std::uint16_t> ports = test::free_ports(3);  // rank 2 never starts
    const std::vector<Peer_address> peers = loopback_peers(ports);
    Stop_flag stop;
    Fd old_listener = listen_for_peers(ports[1]);
    std::jthread unit([&, listener = listen_for_peers(ports[0])]() mutable {
        connect_mesh(std::move(listener), 0, peers, {}, stop);
    });
    const Stop_on_exit stop_on_exit{stop};

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
}

// What arrives on `fd` until the other end closes it (at most 5 s), or
// nullopt if it did not close.
std::optional<std::string> read_until_closed(const Fd& fd) {
    std::string got;
    while (ready(fd.get(), POLLIN)) {
        char chunk[64];
        const ssize_t n = ::recv(fd.get(), chunk, sizeof chunk, 0);
        if (n <= 0) return got;
        got.append(chunk, static_cast<std::size_t>(n));
    }
    return std::nullopt;
}

// Units on different rank table epochs do not connect: a dial from another
// epoch gets 'R' and the refusing unit's epoch (u32) and is closed, and a
// unit whose dial is refused so dials again, until both sides agree.
TEST(TcpMesh, ADialFromAnotherEpochIsRefusedWithRAndTheRefusedDialRetried) {
    const std::vector<std::uint16_t> ports = test::free_ports(2);
    const std::vector<Peer_address> peers = loopback_peers(ports);
    Stop_flag stop;
    const Fd listener = listen_for_peers(ports[1]);
    std::optional<Tcp_mesh> mesh;
    std::jthread unit([&, unit_listener = listen_for_peers(ports[0])]() mutable {
        mesh = connect_mesh(std::move(unit_listener), 0, peers, {}, stop);
    });
    const Stop_on_exit stop_on_exit{stop};

    // Rank 1 dials in from epoch 2: refused.
    const Fd from_epoch_2 = dial_in(ports[0], 1, 2, 2);
    ASSERT_TRUE(from_epoch_2);
    EXPECT_EQ(read_until_closed(from_epoch_2), std::optional<std::string>(std::string("R\x01\0\0\0", 5)));

    // Rank 1 refuses rank 0's dial as from another epoch: rank 0 dials again.
    {
        const Fd refused = accept_dial(listener, 0, 1, /*take=*/false);
        ASSERT_TRUE(refused) << "rank 0 never dialled rank 1";
        const char refusal = 'R';
        ASSERT_EQ(::send(refused.get(), &refusal, 1, MSG_NOSIGNAL), 1);
    }
    const Fd redialled = accept_dial(listener, 0);
    EXPECT_TRUE(redialled) << "rank 0 did not dial again after the refusal";

    // Now at the same epoch both ways: the mesh is up.
    const Fd from_epoch_1 = dial_in(ports[0], 1, 2, 1);
    ASSERT_TRUE(from_epoch_1);
    unit.join();
    ASSERT_TRUE(mesh) << "the mesh did not come up";
    EXPECT_TRUE(mesh->to[1]);
    EXPECT_TRUE(mesh->from[1]);
}

// A running set switching to epoch 2 dials a joiner that refuses it from
// epoch 3: epochs only go forward, so the joiner never takes epoch 2 and
// the connect ends at once without it (later_epochs), not after the join
// timeout (a minute here). A refusal from an earlier epoch, or one that
// names none (an older release), is dialled again as before.
TEST(TcpMesh, ASwitchGivesUpAtOnceOnAJoinerThatRefusesItFromALaterEpoch) {
    const std::vector<std::uint16_t> ports = test::free_ports(2);
    const std::vector<Peer_address> peers = loopback_peers(ports);
    Stop_flag stop;
    const Fd listener = listen_for_peers(ports[1]);
    std::optional<Mesh_connections> connections;
    const auto started = std::chrono::steady_clock::now();
    std::jthread unit([&, unit_listener = listen_for_peers(ports[0])] {
        Mesh_position switching;
        switching.epoch = 2;
        switching.in_session = true;
        connections = connect_peers(unit_listener, 0, peers, {false, true}, switching, default_peer_timeout_ms,
                                    std::chrono::minutes(1), stop);
    });
    const Stop_on_exit stop_on_exit{stop};

    for (const std::string& refusal : {std::string("R"), std::string("R\x01\0\0\0", 5)}) {
        const Fd refused = accept_dial(listener, 0, 2, /*take=*/false);
        ASSERT_TRUE(refused) << "rank 0 did not dial again after the refusal " << refusal.size();
        ASSERT_EQ(::send(refused.get(), refusal.data(), refusal.size(), MSG_NOSIGNAL), static_cast<ssize_t>(refusal.size()));
    }
    {
        const Fd refused = accept_dial(listener, 0, 2, /*take=*/false);
        ASSERT_TRUE(refused);
        const std::string later("R\x03\0\0\0", 5);
        ASSERT_EQ(::send(refused.get(), later.data(), later.size(), MSG_NOSIGNAL), 5);
    }
    unit.join();
    ASSERT_TRUE(connections);
    EXPECT_FALSE(connections->connected(1));
    EXPECT_EQ(connections->later_epochs, (std::vector<std::uint32_t>{0, 3}));
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20)) << "it waited for the join timeout";
}

// Units of one set with another --tcp-streams cannot share a mesh: each
// fails at once, naming the flag, instead of waiting for connections that
// never come.
TEST(TcpMesh, UnitsWithAnotherNumberOfStreamsFailNamingTheFlag) {
    const std::vector<std::uint16_t> ports = test::free_ports(2);
    const std::vector<Peer_address> peers = loopback_peers(ports);
    Stop_flag stop;
    const Stop_on_exit stop_on_exit{stop};
    std::array<std::string, 2> errors;
    {
        std::vector<std::jthread> units;
        for (Rank rank = 0; rank < 2; ++rank)
            units.emplace_back([&, rank, listener = listen_for_peers(ports[rank])]() mutable {
                try {
                    connect_mesh(std::move(listener), rank, peers, {}, stop, rank == 0 ? 2 : 1);
                } catch (const Transport_error& error) {
                    errors[rank] = error.what();
                }
            });
    }
    for (Rank rank = 0; rank < 2; ++rank)
        EXPECT_NE(errors[rank].find("every unit of a set needs the same --tcp-streams"), std::string::npos)
            << "rank " << rank << ": " << errors[rank];
}

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
constexpr auto join_timeout = 300ms;

// Out of file descriptors, accept() fails while the listener stays readable:
// the connect must not spin on it. Measured as the connecting thread's CPU
// time over half a second at the limit.
TEST(TcpMesh, OutOfFileDescriptorsTheConnectWaitsInsteadOfSpinning) {
    const std::vector<std::uint16_t> ports = test::free_ports(2);
    const std::vector<Peer_address> peers = loopback_peers(ports);
    Stop_flag stop;
    Fd unit_listener = listen_for_peers(ports[0]);
    // A connection queued on the listener, never accepted.
    const Fd waiting(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(ports[0]);
    ASSERT_EQ(::connect(waiting.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
    // The thread starts before the descriptors run out (making a thread at
    // the limit trips the sanitizers' runtimes), then connects at the limit.
    std::atomic<bool> at_limit = false;
    std::jthread unit([&, listener = std::move(unit_listener)] {
        while (!at_limit && !stop.requested()) std::this_thread::sleep_for(1ms);
        connect_peers(listener, 0, peers, {true, true}, {1, false, 0, 0}, default_peer_timeout_ms, join_timeout, stop);
    });
    const Stop_on_exit stop_on_exit{stop};
    clockid_t clock{};
    ASSERT_EQ(::pthread_getcpuclockid(unit.native_handle(), &clock), 0);
    const auto cpu = [&] {
        timespec now{};
        ::clock_gettime(clock, &now);
        return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
    };
    rlimit limit{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
    const rlimit saved = limit;
    std::vector<Fd> filler;
    limit.rlim_cur = 256;  // then every descriptor up to it is taken
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
    for (Fd fd(::dup(0)); fd; fd = Fd(::dup(0))) filler.push_back(std::move(fd));
    at_limit = true;
    std::this_thread::sleep_for(100ms);  // into the loop, at the limit
    const auto before = cpu();
    std::this_thread::sleep_for(500ms);  // the span measured
    const auto used = std::chrono::duration_cast<std::chrono::milliseconds>(cpu() - before);
    stop.request();
    unit.join();
    filler.clear();
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
    std::printf("connect at the descriptor limit: %lld ms of CPU in 500 ms\n", static_cast<long long>(used.count()));
    EXPECT_LT(used, 100ms) << "the connect spins on a listener it cannot accept from";
}

// A peer's name that takes long to resolve (DNS unreachable) holds up
// neither a stop nor the peers whose addresses are at hand.
TEST(TcpMesh, ASlowNameResolutionHoldsUpNeitherAStopNorTheOtherDials) {
    const std::vector<std::uint16_t> ports = test::free_ports(3);
    const std::vector<Peer_address> peers = {
        {"127.0.0.1", ports[0]}, {"127.0.0.1", ports[1]}, {"slow-dns.example", ports[2]}};
    Stop_flag stop;
    const Fd listener = listen_for_peers(ports[1]);
    const auto slow = [](const std::string&) -> Resolved {
        std::this_thread::sleep_for(3s);
        return std::string("no answer");
    };
    std::atomic<bool> done = false;
    std::jthread unit([&, unit_listener = listen_for_peers(ports[0])] {
        connect_peers(unit_listener, 0, peers, {true, true, true}, {1, false, 0, 0}, default_peer_timeout_ms,
                      join_timeout, stop, Data_key(), slow);
        done = true;
    });
    const Fd in = accept_dial(listener, 0);
    EXPECT_TRUE(in) << "rank 1 was not dialled while rank 2's name was being resolved";
    const auto asked = Clock::now();
    stop.request();
    ASSERT_TRUE(test::eventually([&] { return done.load(); }, 1s)) << "the stop waited for the resolver";
    EXPECT_LT(Clock::now() - asked, 500ms);
}

// With a run's data key, a dial must prove it over the acceptor's nonce: a
// process with another key (or none), and one replaying a proof recorded on
// another connection, are refused with 'K'; the unit goes on, unharmed.
TEST(TcpMesh, ADialWithoutProofOfTheRunsKeyIsRefused) {
    const std::vector<std::uint16_t> ports = test::free_ports(2);
    const std::vector<Peer_address> peers = loopback_peers(ports);
    const Data_key key("the run's secret, 32 bytes long!"), other("another run's secret, 32 bytes!!");
    Stop_flag stop;
    const Fd listener = listen_for_peers(ports[1]);
    std::optional<Mesh_connections> connections;
    Refusal_counts refused;
    std::jthread unit([&, unit_listener = listen_for_peers(ports[0])] {
        connections = connect_peers(unit_listener, 0, peers, {true, true}, {1, false, 0, 0}, default_peer_timeout_ms,
                                    join_timeout, stop, key, resolve_host, &refused);
    });
    const Stop_on_exit stop_on_exit{stop};

    const Fd wrong_key = dial_in(ports[0], 1, 2, 1, false, other);
    EXPECT_EQ(read_until_closed(wrong_key), std::optional<std::string>("K"));
    const Fd no_key = dial_in(ports[0], 1, 2, 1, false);
    EXPECT_EQ(read_until_closed(no_key), std::optional<std::string>("K"));
    // A proof recorded on one connection, replayed on the next.
    Data_key::Nonce recorded_nonce{};
    const Fd first = dial_in(ports[0], 1, 2, 1, false, other, std::nullopt, &recorded_nonce);
    EXPECT_EQ(read_until_closed(first), std::optional<std::string>("K"));
    Hello_bytes hello{.rank = 1, .units = 2, .epoch = 1};
    const Data_key::Mac recorded = key.prove(recorded_nonce, std::as_bytes(std::span(&hello, 1)));
    const Fd replayed = dial_in(ports[0], 1, 2, 1, false, Data_key(), recorded);
    EXPECT_EQ(read_until_closed(replayed), std::optional<std::string>("K")) << "a proof holds for one nonce only";

    const Fd in = accept_dial(listener, 0, 1, true, key);
    ASSERT_TRUE(in) << "rank 0's dial did not prove the key";
    const Fd out = dial_in(ports[0], 1, 2, 1, false, key);
    ASSERT_TRUE(out);
    unit.join();
    ASSERT_TRUE(connections);
    EXPECT_TRUE(connections->connected(1));
    EXPECT_EQ(refused.get(Refusal::key), 4u) << "every refusal is counted";
    EXPECT_EQ(refused.get(Refusal::table), 0u);
}

TEST(DataKey, ProvesWithHmacSha256OverTheNonceAndTheMessage) {
    // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?",
    // here split into a 16-byte nonce and the rest.
    const std::string data = "what do ya want for nothing?";
    Data_key::Nonce nonce{};
    std::memcpy(nonce.data(), data.data(), nonce.size());
    const Data_key::Mac mac =
        Data_key("Jefe").prove(nonce, std::as_bytes(std::span(data.data() + nonce.size(), data.size() - nonce.size())));
    std::string hex;
    for (const std::byte b : mac) {
        char two[3];
        std::snprintf(two, sizeof two, "%02x", static_cast<unsigned>(b));
        hex += two;
    }
    EXPECT_EQ(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    EXPECT_EQ(Data_key().prove(nonce, {}), Data_key::Mac{}) << "no key: an all-zero proof";
    EXPECT_TRUE(Data_key().verify(nonce, {}, Data_key::Mac{}));
    EXPECT_FALSE(Data_key("Jefe").verify(nonce, {}, Data_key::Mac{}));
}

TEST(DataKey, LoadsFromTheFileOrTheEnvironmentAndNamesWhatIsWrong) {
    const std::string dir = test::make_temp_dir();
    std::ofstream(dir + "/key") << "0123456789abcdef0123\n";
    std::ofstream(dir + "/short") << "tiny\n";
    const auto from_file = Data_key::load(dir + "/key", "ignored when a file is given");
    ASSERT_TRUE(std::holds_alternative<Data_key>(from_file));
    EXPECT_TRUE(std::get<Data_key>(from_file).configured());
    const Data_key::Nonce nonce{};
    EXPECT_EQ(std::get<Data_key>(from_file).prove(nonce, {}), Data_key("0123456789abcdef0123").prove(nonce, {}))
        << "the trailing newline is not part of the key";
    EXPECT_TRUE(std::get<Data_key>(Data_key::load(std::nullopt, "0123456789abcdef")).configured());
    EXPECT_FALSE(std::get<Data_key>(Data_key::load(std::nullopt, nullptr)).configured());
    EXPECT_FALSE(std::get<Data_key>(Data_key::load(std::nullopt, "")).configured());

    const auto too_short = Data_key::load(dir + "/short", nullptr);
    ASSERT_TRUE(std::holds_alternative<std::string>(too_short));
    EXPECT_EQ(std::get<std::string>(too_short), "--data-key-file " + dir +
                                                    "/short: the data key has 4 bytes; it needs at least 16 "
                                                    "(e.g. head -c 32 /dev/urandom | base64)");
    const auto missing = Data_key::load(dir + "/absent", nullptr);
    ASSERT_TRUE(std::holds_alternative<std::string>(missing));
    EXPECT_NE(std::get<std::string>(missing).find("cannot be read"), std::string::npos);
    std::filesystem::remove_all(dir);
}

// A process whose hello does not fit the table (another number of ranks, a
// rank that is not live, this unit's own rank) is refused with 'U' and
// closed; the unit goes on connecting its real peers, it does not fail.
TEST(TcpMesh, AHelloThatDoesNotFitTheTableIsRefusedWithoutFailingTheUnit) {
    const std::vector<std::uint16_t> ports = test::free_ports(3);
    const std::vector<Peer_address> peers = loopback_peers(ports);
    Stop_flag stop;
    const Fd listener = listen_for_peers(ports[1]);
    std::optional<Mesh_connections> connections;
    Refusal_counts refused;
    std::jthread unit([&, unit_listener = listen_for_peers(ports[0])] {
        connections = connect_peers(unit_listener, 0, peers, {true, true, false}, {1, false, 0, 0},
                                    default_peer_timeout_ms, join_timeout, stop, Data_key(), resolve_host, &refused);
    });
    const Stop_on_exit stop_on_exit{stop};

    for (const auto& [rank, units] : {std::pair<std::uint32_t, std::uint32_t>{1, 4}, {2, 3}, {0, 3}, {7, 3}}) {
        const Fd stray = dial_in(ports[0], rank, units);
        ASSERT_TRUE(stray);
        EXPECT_EQ(read_until_closed(stray), std::optional<std::string>("U")) << "rank " << rank << " of " << units;
    }
    // A hello naming a stream outside its own count is no eb-builder's:
    // closed unanswered, counted as such.
    for (const auto& [stream, streams] : {std::pair<std::uint16_t, std::uint16_t>{1, 1}, {0, 0}, {5, 2}}) {
        const Fd odd = dial_in(ports[0], 1, 3, 1, false, Data_key(), std::nullopt, nullptr, stream, streams);
        ASSERT_TRUE(odd);
        EXPECT_EQ(read_until_closed(odd), std::optional<std::string>("")) << "stream " << stream << " of " << streams;
    }
    // A unit of the release before (version 8: no sizes announced a cycle
    // ahead) is closed unanswered too; the log names both versions.
    const Fd older = dial_in(ports[0], 1, 3, 1, false, Data_key(), std::nullopt, nullptr, 0, 1, 8);
    ASSERT_TRUE(older);
    EXPECT_EQ(read_until_closed(older), std::optional<std::string>(""));
    const Fd in = accept_dial(listener, 0), out = dial_in(ports[0], 1, 3);
    ASSERT_TRUE(in && out);
    unit.join();
    ASSERT_TRUE(connections) << "the unit failed";
    EXPECT_TRUE(connections->connected(1));
    EXPECT_EQ(refused.get(Refusal::table), 4u) << "every refusal is counted";
    EXPECT_EQ(refused.get(Refusal::protocol), 4u);
}

// A dial counts once the peer has taken its hello ('A'), not when the hello
// is sent: a peer on another epoch refuses it after reading it, and a mesh
// counted up by then would hand on a connection that is already refused
// (found broken at the first send, the peer lost for good).
TEST(TcpMesh, ADialIsUpOnlyOnceThePeerTookItsHello) {
    const std::vector<std::uint16_t> ports = test::free_ports(2);
    const std::vector<Peer_address> peers = loopback_peers(ports);
    Stop_flag stop;
    const Fd listener = listen_for_peers(ports[1]);
    std::optional<Tcp_mesh> mesh;
    std::atomic<bool> done = false;
    std::jthread unit([&, unit_listener = listen_for_peers(ports[0])]() mutable {
        mesh = connect_mesh(std::move(unit_listener), 0, peers, {}, stop);
        done = true;
    });
    const Stop_on_exit stop_on_exit{stop};

    const Fd in = dial_in(ports[0], 1, 2);  // rank 1's own dial is taken
    ASSERT_TRUE(in);
    {
        const Fd pending = accept_dial(listener, 0, 1, /*take=*/false);
        ASSERT_TRUE(pending) << "rank 0 never dialled rank 1";
        EXPECT_FALSE(test::eventually([&] { return done.load(); }, 300ms)) << "up before the hello was taken";
        const char refusal = 'R';
        ASSERT_EQ(::send(pending.get(), &refusal, 1, MSG_NOSIGNAL), 1);
    }
    const Fd taken = accept_dial(listener, 0);
    ASSERT_TRUE(taken) << "rank 0 did not dial again after the refusal";
    unit.join();
    ASSERT_TRUE(mesh);
    const char byte = 'x';
    EXPECT_EQ(::send(mesh->to[1].get(), &byte, 1, MSG_NOSIGNAL), 1) << "the connection handed on is the taken one";
    char got = 0;
    ASSERT_TRUE(ready(taken.get(), POLLIN));
    EXPECT_EQ(::recv(taken.get(), &got, 1, 0), 1);
    EXPECT_EQ(got, 'x');
}

// A running unit (rank 0, in session) connecting two joiners: rank 1
// connects both ways, rank 2 takes rank 0's dial but never dials in. At the
// join timeout the connect ends with rank 1 only; rank 2's half connection
// is closed, not handed on.
TEST(TcpMesh, ARunningSetGivesUpOnAJoinerNotConnectedBothWaysAtTheJoinTimeout) {
    const std::vector<std::uint16_t> ports = test::free_ports(3);
    const std::vector<Peer_address> peers = loopback_peers(ports);
    Stop_flag stop;
    const Fd joiner_1 = listen_for_peers(ports[1]), joiner_2 = listen_for_peers(ports[2]);
    std::optional<Mesh_connections> connections;
    const auto began = Clock::now();
    std::jthread unit([&, listener = listen_for_peers(ports[0])] {
        connections = connect_peers(listener, 0, peers, {false, true, true}, {2, true, 10, 5}, default_peer_timeout_ms,
                                    join_timeout, stop);
    });
    const Stop_on_exit stop_on_exit{stop};

    const Fd in_1 = accept_dial(joiner_1, 0, 2), out_1 = dial_in(ports[0], 1, 3, 2);
    ASSERT_TRUE(in_1 && out_1);
    const Fd in_2 = accept_dial(joiner_2, 0, 2);
    ASSERT_TRUE(in_2) << "rank 0 never dialled rank 2";
    unit.join();
    const auto took = Clock::now() - began;
    ASSERT_TRUE(connections);
    EXPECT_TRUE(connections->connected(1));
    EXPECT_FALSE(connections->connected(2));
    EXPECT_FALSE(connections->mesh.to[2]) << "the half connection is not handed on";
    EXPECT_EQ(read_until_closed(in_2), std::optional<std::string>("")) << "and rank 2 sees it closed";
    EXPECT_GE(took, join_timeout);
    EXPECT_LT(took, join_timeout + 1s);
}

// A process that starts waits for its peers however long they take, until
// a running set dials it: from that hello on it is joining, and gives up on
// the peers not connected by the join timeout.
TEST(TcpMesh, AStartingUnitWaitsWithoutLimitUntilARunningSetDialsIt) {
    const std::vector<std::uint16_t> ports = test::free_ports(3);
    const std::vector<Peer_address> peers = loopback_peers(ports);
    Stop_flag stop;
    const Fd running = listen_for_peers(ports[1]);  // rank 2 never starts
    std::optional<Mesh_connections> connections;
    std::atomic<bool> done = false;
    std::jthread unit([&, listener = listen_for_peers(ports[0])] {
        connections = connect_peers(listener, 0, peers, {true, true, true}, {2, false, 0, 0}, default_peer_timeout_ms,
                                    join_timeout, stop);
        done = true;
    });
    const Stop_on_exit stop_on_exit{stop};

    const Fd in = accept_dial(running, 0, 2);
    ASSERT_TRUE(in);
    EXPECT_FALSE(test::eventually([&] { return done.load(); }, 3 * join_timeout)) << "no deadline before joining";
    const auto dialled = Clock::now();
    const Fd out = dial_in(ports[0], 1, 3, 2, true);
    ASSERT_TRUE(out);
    ASSERT_TRUE(test::eventually([&] { return done.load(); }, join_timeout + 1s)) << "the join timeout ends it";
    unit.join();
    EXPECT_GE(Clock::now() - dialled, join_timeout);
    ASSERT_TRUE(connections);
    EXPECT_TRUE(connections->connected(1));
    EXPECT_FALSE(connections->connected(2));
    ASSERT_TRUE(connections->hellos[1]);
    EXPECT_TRUE(connections->hellos[1]->in_session);
}

}  // namespace
}  // namespace eb
