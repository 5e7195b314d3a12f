#pragma once

#include <memory>

#include "base/data_threads.hpp"
#include "base/rank.hpp"
#include "base/stop_flag.hpp"
#include "transport/mesh_transport.hpp"
#include "transport/tcp/tcp_mesh.hpp"
#include "transport/transport_settings.hpp"

namespace eb {

// The unit's transport over `mesh`: TCP, moving data on the unit's data
// threads, or verbs queue pairs set up over it (the HCA moves the data).
// Peer_links calls it; a unit never does.
std::unique_ptr<Mesh_transport> make_transport(const Transport_settings& settings, Rank rank, Tcp_mesh mesh,
                                               const Stop_flag& stop, Mesh_transport::Loss_observer on_loss,
                                               Data_threads& threads);

}  // namespace eb
