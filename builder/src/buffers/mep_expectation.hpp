#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formats/stream_map.hpp"

namespace eb {

// What the consumer of a BU's MEP ring checks the MEPs of one rank-table
// epoch against: the source of each MEP slot, in order, the events between
// two MEPs of this BU, and the stream map every MEP carries. The BU publishes it beside the ring (a
// shared-memory file named mep_expectation_name) before it commits the
// first MEP of that epoch, so a consumer that meets a MEP of a new epoch
// (a failover, a spare made live) reads what it needs from there: it never
// waits for the pod's mounted rank table, which the kubelet refreshes
// late. Text: a line "epoch E stride S sources A B C", then a line
// "held A name ..." per source in slot order (its streams, maybe none) and
// a line "lacked name ..." (stream names have no spaces: stream_name.hpp).
struct Mep_expectation {
    std::uint32_t epoch = 0;
    std::uint64_t stride = 0;
    std::vector<std::uint32_t> sources;
    Stream_map streams;  // one list per source

    friend bool operator==(const Mep_expectation&, const Mep_expectation&) = default;
};

std::string mep_expectation_name(const std::string& ring, std::uint32_t epoch);
// Writes it (replacing an earlier one of the same epoch). Throws on a
// system error.
void publish_mep_expectation(const std::string& ring, const Mep_expectation& expectation);
// The one published for `epoch`; nullopt if there is none. Throws if it is
// malformed (names the file and what is wrong).
std::optional<Mep_expectation> read_mep_expectation(const std::string& ring, std::uint32_t epoch);
// Removes the one of `epoch`; for the BU that closes its ring.
void remove_mep_expectation(const std::string& ring, std::uint32_t epoch);

}  // namespace eb
