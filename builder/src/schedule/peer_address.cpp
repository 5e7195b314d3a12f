#include "schedule/peer_address.hpp"

#include <charconv>

namespace eb {

std::variant<Peer_address, Peer_address_error> parse_peer_address(std::string_view text) {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return Peer_address_error::not_host_port;
    const std::string_view port_text = text.substr(colon + 1);
    std::uint16_t port = 0;
    const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || error != std::errc{} || end != port_text.data() + port_text.size() || port == 0)
        return Peer_address_error::bad_port;
    return Peer_address{std::string(text.substr(0, colon)), port};
}

}  // namespace eb
