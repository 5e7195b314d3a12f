#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/busy_poll.hpp"
#include "base/data_threads.hpp"
#include "transport/mesh_transport.hpp"
#include "base/stop_flag.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace eb {

enum class Transport_kind { tcp, verbs };
std::string_view transport_kind_name(Transport_kind kind);

struct Transport_settings {
    Transport_kind kind = Transport_kind::tcp;
    std::string rdma_device;  // verbs: empty means the only device there is
    int gid_index = -1;       // verbs, RoCE: < 0 picks one
    std::uint32_t peer_timeout_ms = 1000;
    std::uint32_t setup_timeout_ms = 5000;
    std::uint32_t busy_poll_us = default_busy_poll_us;  // looking for data before sleeping (Busy_poll)
};

// Whether this build has the verbs transport (libibverbs found at build time).
bool verbs_available();

// The unit's transport over `mesh`: TCP, moving data on the unit's data
// threads, or verbs queue pairs set up over it (the HCA moves the data).
std::unique_ptr<Mesh_transport> make_transport(const Transport_settings& settings, Rank rank, Tcp_mesh mesh,
                                               const Stop_flag& stop, Mesh_transport::Loss_observer on_loss,
                                               Data_threads& threads);

}  // namespace eb
