#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schedule/barrier_plan.hpp"
#include "transport/data_key.hpp"
#include "formats/event_model.hpp"
#include "schedule/peer_address.hpp"
#include "base/rank.hpp"
#include "schedule/rank_table.hpp"
#include "transport/transport_settings.hpp"

namespace eb {

// Where the RU's MFPs come from and where the BU's MEPs go.
enum class Source_kind { generator, shm, file, prepared };
enum class Output_kind { check, shm, discard };
// What a BU does with a MEP that misses a lost source's MFP.
enum class Incomplete_policy { drop, flag };

// Settings of one eb-builder process, from its command line.
struct Config {
    Rank rank = 0;
    bool rank_given = false;          // --rank given; required with --peers
    std::vector<Peer_address> peers;  // every unit's data address, in rank order; empty: controlled
    std::uint16_t http_port = 8080;
    std::uint32_t packing_factor = 1000;
    std::uint32_t fragment_size = 128;
    std::uint64_t events = 0;  // 0: until stopped
    Size_model size_model = Size_model::fixed;
    std::uint64_t rate = 0;  // generated events per second per source; 0: as fast as possible
    Source_kind source = Source_kind::generator;
    std::string source_file;  // for Source_kind::file
    Output_kind output = Output_kind::check;
    std::string run_name = "eb";  // names the shared-memory rings
    std::uint64_t ring_mib = 64;
    Layout layout = Layout::folded;
    std::vector<Rank> dummies;  // ascending
    Barrier_kind barrier = Barrier_kind::tournament;
    std::uint32_t barrier_every = 1;  // phases between barriers
    std::string token_file;           // --token-file; empty: EB_CONTROL_TOKEN
    std::string data_key_file;        // --data-key-file; empty: EB_DATA_KEY
    Data_key data_key;                // loaded from either at start (main); none: connections unauthenticated
    std::uint32_t peer_timeout_ms = 1000;
    std::uint32_t join_timeout_ms = 5000;  // a joiner not connected by then is lost (docs/control-api.md)
    std::uint32_t output_timeout_ms = 1000;  // a MEP the output has no room for by then is dropped here
    Incomplete_policy incomplete = Incomplete_policy::drop;
    std::string numa;  // --numa-node N or --rdma-device NAME; empty: unpinned
    Transport_kind transport = Transport_kind::tcp;
    std::string rdma_device;  // --rdma-device, else EB_RDMA_DEVICE: the verbs transport's device
    int gid_index = -1;       // --gid-index; < 0: picked
    std::uint32_t busy_poll_us = default_busy_poll_us;  // --busy-poll-us
    std::uint32_t data_threads = 0;  // --data-threads; 0: unset, chosen at start (choose_data_threads)
    std::uint32_t tcp_streams = 1;   // --tcp-streams: data connections per peer and direction
    std::uint32_t verbs_depth = 2;   // --verbs-depth (receives_ahead)
    std::uint32_t receive_window = 0;  // --receive-window: phases ahead a BU posts its receives; 0: a cycle's
    std::optional<Injected_fault> fault;  // --inject-fault (verbs)

    // With --peers the process configures and starts itself; without, it
    // waits for the control API (docs/control-api.md).
    bool self_configured() const { return !peers.empty(); }

    Event_model event_model() const { return {size_model, fragment_size}; }
    Rank_table rank_table() const { return Rank_table(flag_functions(units(), layout, dummies)); }

    Rank units() const { return static_cast<Rank>(peers.size()); }

    // Whether a BU posts the next cycle's receives as soon as the set goes
    // on (--verbs-depth 2): over verbs, where a posted receive takes its MFP
    // on arrival. Over TCP data moves only when waited for, so posting
    // sooner gains nothing there. The RU's source then holds two cycles.
    bool receives_ahead() const { return transport == Transport_kind::verbs && verbs_depth > 1; }
    std::size_t cycles_held() const { return receives_ahead() ? 2 : 1; }

    // A joiner may still be connecting to other units for up to the join
    // timeout before it sends its queue-pair addresses: the set-up waits that
    // long and a peer timeout more.
    Transport_settings transport_settings() const {
        return {transport, rdma_device, gid_index, peer_timeout_ms, join_timeout_ms + peer_timeout_ms, busy_poll_us, tcp_streams,
                fault};
    }
};

}  // namespace eb
