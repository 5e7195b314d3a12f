#include "transport/verbs/verbs_choices.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace eb {
namespace {

std::array<std::uint8_t, 16> ipv4_gid(std::uint8_t last) {
    return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 99, 0, last};
}
std::array<std::uint8_t, 16> link_local_gid() { return {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0x11, 0x22, 0xff, 0xfe, 0, 0, 1}; }
std::array<std::uint8_t, 16> ipv6_gid() { return {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}; }

// What rdma_rxe and mlx5 list on a RoCE port: link-local v1/v2 first, then
// each address in both versions.
TEST(PickGidIndex, PrefersRoceV2WithAnIpv4Address) {
    struct Case {
        const char* name;
        std::vector<Gid_candidate> table;
        std::optional<std::uint32_t> expected;
    };
    const Case cases[] = {
        {"rxe on veth", {{0, Gid_kind::roce_v1, link_local_gid()}, {1, Gid_kind::roce_v2, ipv4_gid(1)}}, 1},
        {"mlx5, v1 and v2 of each address",
         {{0, Gid_kind::roce_v1, link_local_gid()}, {1, Gid_kind::roce_v2, link_local_gid()},
          {2, Gid_kind::roce_v1, ipv4_gid(1)}, {3, Gid_kind::roce_v2, ipv4_gid(1)}},
         3},
        {"IPv6 only: v2 over v1", {{4, Gid_kind::roce_v1, ipv6_gid()}, {5, Gid_kind::roce_v2, ipv6_gid()}}, 5},
        {"IPv4 v2 over IPv6 v2, whatever the order",
         {{2, Gid_kind::roce_v2, ipv6_gid()}, {6, Gid_kind::roce_v2, ipv4_gid(9)}},
         6},
        {"two IPv4 v2: the lowest index", {{7, Gid_kind::roce_v2, ipv4_gid(2)}, {3, Gid_kind::roce_v2, ipv4_gid(1)}}, 3},
        {"only v1 with IPv4", {{0, Gid_kind::roce_v1, link_local_gid()}, {2, Gid_kind::roce_v1, ipv4_gid(1)}}, 2},
        {"only link-local: none", {{0, Gid_kind::roce_v1, link_local_gid()}, {1, Gid_kind::roce_v2, link_local_gid()}},
         std::nullopt},
        {"empty entries are skipped", {{0, Gid_kind::roce_v2, {}}, {1, Gid_kind::roce_v2, ipv4_gid(1)}}, 1},
        {"InfiniBand GIDs are not RoCE", {{0, Gid_kind::infiniband, ipv6_gid()}}, std::nullopt},
        {"no entries", {}, std::nullopt},
    };
    for (const Case& c : cases) EXPECT_EQ(pick_gid_index(c.table), c.expected) << c.name;
}

// A silent peer is given up within the peer timeout, as close to it as the
// powers of two allow, and never before half of it.
TEST(QpTimeouts, GiveAPeerUpWithinThePeerTimeout) {
    struct Case {
        std::uint32_t peer_timeout_ms;
        std::uint8_t timeout;
    };
    const Case cases[] = {{100, 11}, {1000, 14}, {5000, 17}, {600'000, 24}};
    for (const Case& c : cases) {
        const Qp_timeouts timeouts = qp_timeouts(c.peer_timeout_ms);
        EXPECT_EQ(timeouts.retry_count, 7) << c.peer_timeout_ms;
        EXPECT_EQ(timeouts.timeout, c.timeout) << c.peer_timeout_ms;
        EXPECT_LE(give_up_ms(timeouts), c.peer_timeout_ms) << c.peer_timeout_ms;
        EXPECT_GT(give_up_ms(timeouts), c.peer_timeout_ms / 2.0) << c.peer_timeout_ms;
    }
    EXPECT_EQ(qp_timeouts(0).timeout, 1);  // clamped to the smallest the field holds
}

TEST(LinkFailureOf, NamesWhyAPeerIsLostFromACompletion) {
    const std::pair<ibv_wc_status, Link_failure> cases[] = {
        {IBV_WC_RETRY_EXC_ERR, Link_failure::timeout},   {IBV_WC_RNR_RETRY_EXC_ERR, Link_failure::timeout},
        {IBV_WC_REM_OP_ERR, Link_failure::reset},        {IBV_WC_REM_ABORT_ERR, Link_failure::reset},
        {IBV_WC_REM_INV_REQ_ERR, Link_failure::reset},   {IBV_WC_REM_ACCESS_ERR, Link_failure::reset},
        {IBV_WC_LOC_LEN_ERR, Link_failure::error},       {IBV_WC_WR_FLUSH_ERR, Link_failure::error},
        {IBV_WC_LOC_PROT_ERR, Link_failure::error},      {IBV_WC_GENERAL_ERR, Link_failure::error},
    };
    for (const auto& [status, failure] : cases)
        EXPECT_EQ(link_failure_of(status), failure) << ibv_wc_status_str(status);
}

Qp_address good_address() {
    Qp_address address;
    address.rank = 3;
    address.control_qpn = 17;
    address.data_qpn = 18;
    address.control_psn = 0xabcdef;
    address.data_psn = 1;
    address.has_gid = 1;
    address.gid = ipv4_gid(3);
    address.mtu = 3;
    address.link_layer = 2;
    return address;
}

TEST(CheckQpAddress, NamesWhatIsWrongWithAPeersAddress) {
    struct Case {
        const char* name;
        void (*spoil)(Qp_address&);
        const char* says;  // nullptr: accepted
    };
    const Case cases[] = {
        {"good", [](Qp_address&) {}, nullptr},
        {"a TCP peer's bytes", [](Qp_address& a) { a.magic = 0x12345678; }, "--transport verbs"},
        {"the version before credits", [](Qp_address& a) { a.version = 1; }, "version 1, this unit 2"},
        {"another rank", [](Qp_address& a) { a.rank = 4; }, "says rank 4, expected 3"},
        {"an InfiniBand peer", [](Qp_address& a) { a.link_layer = 1; }, "InfiniBand, this unit's Ethernet"},
        {"MTU code 0", [](Qp_address& a) { a.mtu = 0; }, "MTU code 0"},
        {"MTU code 6", [](Qp_address& a) { a.mtu = 6; }, "MTU code 6"},
        {"RoCE without GID", [](Qp_address& a) { a.has_gid = 0; }, "sent no GID"},
        {"QPN over 24 bits", [](Qp_address& a) { a.data_qpn = 1u << 24; }, "not 24-bit numbers"},
        {"QPN zero", [](Qp_address& a) { a.control_qpn = 0; }, "not 24-bit numbers"},
        {"PSN over 24 bits", [](Qp_address& a) { a.control_psn = 1u << 24; }, "sequence numbers"},
    };
    for (const Case& c : cases) {
        Qp_address address = good_address();
        c.spoil(address);
        const std::optional<std::string> problem = check_qp_address(address, 3, 2);
        if (c.says == nullptr) {
            EXPECT_FALSE(problem) << c.name << ": " << problem.value_or("");
        } else {
            ASSERT_TRUE(problem) << c.name;
            EXPECT_NE(problem->find(c.says), std::string::npos) << c.name << ": " << *problem;
        }
    }
}

}  // namespace
}  // namespace eb
