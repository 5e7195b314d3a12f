#pragma once

// The stream map of the seed MEP (seeds.cpp) and of the MEPs the fuzzed
// checker expects (mep_fuzz.cpp): streams on two of the three slots, and
// none lacked, so mutations reach the names, counts and padding.
#include "formats/stream_map.hpp"

namespace eb {

inline Stream_map seed_stream_map() { return {{{"velo-0a", "velo-0b"}, {}, {"ut:1/a"}}, {}}; }

}  // namespace eb
