#pragma once

#include <memory>

#include "buffer.hpp"
#include "checking_writer.hpp"
#include "config.hpp"
#include "rank_table.hpp"
#include "shm_ring.hpp"
#include "stop_flag.hpp"
#include "unit_status.hpp"

namespace eb {

// The unit's MFP source (if it runs an RU) and MEP output (if it runs a BU),
// as the command line picks them.
class Unit_buffers {
public:
    // The unit's roles at `rank` (RU, BU or both) do not change across rank
    // tables, only whether it is live; sizes fit tables of table.units() ranks.
    Unit_buffers(const Config& config, Rank rank, const Rank_table& table, Unit_status& status, const Stop_flag& stop);

    Buffer_reader* source() const { return paced_ ? paced_.get() : source_.get(); }
    Buffer_writer* output() const { return counted_ ? counted_.get() : output_.get(); }

    // Under a (new) table, from chunk `cycle_chunk` on: the checking output
    // expects the table's sources and this BU's chunks.
    void expect(const Rank_table& table, std::uint64_t cycle_chunk);
    // Fractions of the rings in use; < 0 where there is no ring.
    double mfp_ring_fill() const;
    double mep_ring_fill() const;

    // At the end of a complete run: waits until a consumer process has taken
    // every MEP, when the output is a ring, then marks the ring complete.
    void finish_output();
    // Marks a ring output stopped (ended on request) or failed (on an error),
    // so its consumer can tell either from a complete run.
    void stop_output();
    void fail_output();

private:
    std::unique_ptr<Buffer_reader> source_;
    std::unique_ptr<Buffer_reader> paced_;
    std::unique_ptr<Buffer_writer> output_;
    std::unique_ptr<Buffer_writer> counted_;
    Shm_ring_writer* ring_output_ = nullptr;
    Shm_ring_reader* ring_source_ = nullptr;
    Checking_writer* checking_output_ = nullptr;
    Rank rank_;
    std::uint32_t packing_factor_;
};

}  // namespace eb
