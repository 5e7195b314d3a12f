#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace eb {

// Data-plane address of one EB unit as given on the command line. The host is
// resolved late (and again on every retry) because in Kubernetes the DNS name
// of a pod exists only once the pod does.
struct Peer_address {
    std::string host;
    std::uint16_t port = 0;

    friend bool operator==(const Peer_address&, const Peer_address&) = default;
};

// Why a text is not a peer address.
enum class Peer_address_error {
    not_host_port,  // no colon, or nothing before it
    bad_port,       // what follows the last colon is not a number in 1..65535
};

// "host:port": the port follows the last colon and is in 1..65535, the host
// is not empty. Callers name the field and the fix.
std::variant<Peer_address, Peer_address_error> parse_peer_address(std::string_view text);

}  // namespace eb
