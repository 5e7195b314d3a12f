#include "transport/transport.hpp"

namespace eb {

std::string_view link_failure_name(Link_failure failure) {
    switch (failure) {
        case Link_failure::closed: return "closed";
        case Link_failure::reset: return "reset";
        case Link_failure::timeout: return "timeout";
        case Link_failure::error: return "error";
        case Link_failure::join_timeout: return "join_timeout";
        case Link_failure::out_of_step: return "out_of_step";
        case Link_failure::excluded: return "excluded";
        case Link_failure::later_epoch: return "later_epoch";
    }
    return "error";
}
}  // namespace eb
