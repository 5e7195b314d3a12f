#pragma once

#include <cstdint>
#include <string>

namespace eb {

// Data-plane address of one EB unit as given on the command line. The host is
// resolved late (and again on every retry) because in Kubernetes the DNS name
// of a pod exists only once the pod does.
struct Peer_address {
    std::string host;
    std::uint16_t port = 0;

    friend bool operator==(const Peer_address&, const Peer_address&) = default;
};

}  // namespace eb
