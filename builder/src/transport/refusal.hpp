#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace eb {

// Why this unit refused a data connection (docs/control-api.md, "Data
// connections"): a wrong proof of the run's data key, another rank table
// epoch (a peer switching at another moment: it dials again), a hello that
// does not fit the table, not a hello of this protocol, or no whole hello
// within the hello timeout.
enum class Refusal { key, epoch, table, protocol, slow };
inline constexpr std::size_t refusal_kinds = 5;
inline std::string_view refusal_name(Refusal refusal) {
    switch (refusal) {
        case Refusal::key: return "key";
        case Refusal::epoch: return "epoch";
        case Refusal::table: return "table";
        case Refusal::protocol: return "protocol";
        case Refusal::slow: return "slow";
    }
    return "protocol";
}

// Refusals counted across sessions; written by the connecting thread, read
// by any.
class Refusal_counts {
public:
    void add(Refusal refusal) { counts_[static_cast<std::size_t>(refusal)].fetch_add(1, std::memory_order_relaxed); }
    std::uint64_t count(Refusal refusal) const {
        return counts_[static_cast<std::size_t>(refusal)].load(std::memory_order_relaxed);
    }

private:
    std::array<std::atomic<std::uint64_t>, refusal_kinds> counts_{};
};

}  // namespace eb
