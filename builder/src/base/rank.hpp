#pragma once

#include <cstdint>

namespace eb {

// Position of an EB unit in the rank table, 0-based. For now it is also the
// source id of the unit's RU.
using Rank = std::uint32_t;

}  // namespace eb
