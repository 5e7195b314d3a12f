#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace eb {

// Data-plane address of one EB unit as given on the command line. The host is
// resolved late (and again on every retry) because in Kubernetes the DNS name
// of a pod exists only once the pod does.
struct Peer_address {
    std::string host;
    std::uint16_t port = 0;

    friend bool operator==(const Peer_address&, const Peer_address&) = default;
};

// "host:port": the port follows the last colon and is in 1..65535, the host
// is not empty. nullopt for anything else; callers name the field and the fix.
std::optional<Peer_address> parse_peer_address(std::string_view text);

}  // namespace eb
