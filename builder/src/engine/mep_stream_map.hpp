#pragma once

#include "schedule/rank_table.hpp"
#include "formats/stream_map.hpp"

namespace eb {

// The stream map every MEP built under `table` carries: per source slot the
// streams its RU reads (none for an unread source: its fibres went with a
// failed server), and the streams the table lists unread.
Stream_map mep_stream_map(const Rank_table& table);

}  // namespace eb
