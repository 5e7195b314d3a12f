#include "transport/tcp/joiner_watch.hpp"

namespace eb {

using namespace std::chrono_literals;

// Joiners are dialled as soon as the table comes, and looked at often: a
// failover's switch waits on this.
constexpr Lost_peer_probe::Timing joiner_timing{10ms, 500ms};

Joiner_watch::Joiner_watch(std::uint64_t epoch, std::vector<Peer_address> peers, const std::set<Rank>& joiners,
                           Rank self, int peer_timeout_ms, std::chrono::milliseconds patience)
    : epoch_(epoch),
      give_up_at_(std::chrono::steady_clock::now() + patience),
      waiting_(joiners),
      probe_(
          std::move(peers), self, peer_timeout_ms, [joiners](Rank peer) { return joiners.contains(peer); },
          [this](Rank peer, bool reached) {
              std::lock_guard lock(mutex_);
              if (reached) waiting_.erase(peer);
          },
          joiner_timing) {}

bool Joiner_watch::ready() const {
    if (std::chrono::steady_clock::now() >= give_up_at_) return true;
    std::lock_guard lock(mutex_);
    return waiting_.empty();
}

}  // namespace eb
