#include "transport/transport_factory.hpp"

#include "transport/tcp/tcp_transport.hpp"
#ifdef EB_WITH_VERBS
#include "transport/verbs/verbs_transport.hpp"
#endif

namespace eb {

std::unique_ptr<Mesh_transport> make_transport(const Transport_settings& settings, Rank rank, Tcp_mesh mesh,
                                               const Stop_flag& stop, Mesh_transport::Loss_observer on_loss,
                                               Data_threads& threads) {
    if (settings.kind == Transport_kind::tcp)
        return std::make_unique<Tcp_transport>(
            rank, std::move(mesh), stop, std::move(on_loss),
            Liveness{std::chrono::milliseconds(settings.peer_timeout_ms),
                     std::chrono::milliseconds(settings.setup_timeout_ms)},
            Busy_poll(std::chrono::microseconds(settings.busy_poll_us)), &threads);
#ifdef EB_WITH_VERBS
    return std::make_unique<Verbs_transport>(
        rank, std::move(mesh), stop,
        Verbs_transport::Settings{settings.rdma_device, 1, settings.gid_index, settings.peer_timeout_ms,
                                  settings.setup_timeout_ms, settings.busy_poll_us, settings.fault},
        std::move(on_loss));
#else
    throw Transport_error("this eb-builder was built without libibverbs: --transport verbs is not available; "
                          "rebuild with libibverbs-dev installed, or use --transport tcp");
#endif
}

}  // namespace eb
