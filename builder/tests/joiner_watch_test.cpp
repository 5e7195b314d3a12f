#include "transport/tcp/joiner_watch.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "base/socket.hpp"
#include "test_support.hpp"

namespace eb {
namespace {

using namespace std::chrono_literals;

// Rank 0 watches; ranks 1 and 2 join, rank 3 is a running peer.
std::vector<Peer_address> addresses(const std::vector<std::uint16_t>& ports) {
    std::vector<Peer_address> out;
    for (const std::uint16_t port : ports) out.push_back({"127.0.0.1", port});
    return out;
}

TEST(JoinerWatch, IsReadyOnceEveryJoinerAnswersAndNotBefore) {
    const std::vector<std::uint16_t> ports = test::free_ports(4);
    Fd first = listen_for_peers(ports[1]);
    const Joiner_watch watch(7, addresses(ports), {1, 2}, 0, 1000, 60s);
    EXPECT_EQ(watch.epoch(), 7u);
    // Rank 1 answers at once; rank 2 listens nowhere yet: not ready.
    EXPECT_FALSE(test::eventually([&] { return watch.ready(); }, 500ms)) << "ready with rank 2 not listening";
    Fd second = listen_for_peers(ports[2]);  // its process is configured: it listens
    EXPECT_TRUE(test::eventually([&] { return watch.ready(); }, 10s)) << "rank 2 listens, not ready";
}

TEST(JoinerWatch, IsReadyOncePatienceIsSpentWhateverTheJoiners) {
    const std::vector<std::uint16_t> ports = test::free_ports(2);
    const Joiner_watch watch(2, addresses(ports), {1}, 0, 1000, 200ms);
    EXPECT_TRUE(test::eventually([&] { return watch.ready(); }, 10s)) << "still waiting after its patience";
}

}  // namespace
}  // namespace eb
