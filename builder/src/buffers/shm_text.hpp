#pragma once

#include <optional>
#include <string>

namespace eb {

// Small text files in POSIX shared memory, beside a ring: what a BU tells
// its consumer (mep_expectation) and what a consumer tells people
// (stream_tally_report). `name` as for shm_open ("/eb-...").

// Writes `text` (replacing what was there). Throws on a system error.
void write_shm_text(const std::string& name, const std::string& text);
// The text, or nullopt if there is no such file. Throws on a system error.
std::optional<std::string> read_shm_text(const std::string& name);

}  // namespace eb
