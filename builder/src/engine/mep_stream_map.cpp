#include "engine/mep_stream_map.hpp"

namespace eb {

Stream_map mep_stream_map(const Rank_table& table) {
    Stream_map map;
    for (const Rank source : table.sources()) map.held.push_back(table.streams(source));
    map.lacked = table.unread_streams();
    return map;
}

}  // namespace eb
