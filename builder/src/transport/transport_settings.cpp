#include "transport/transport_settings.hpp"

namespace eb {

std::string_view transport_kind_name(Transport_kind kind) { return kind == Transport_kind::verbs ? "verbs" : "tcp"; }

bool verbs_available() {
#ifdef EB_WITH_VERBS
    return true;
#else
    return false;
#endif
}

}  // namespace eb
