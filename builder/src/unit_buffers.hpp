#pragma once

#include <memory>

#include "buffer.hpp"
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
    Unit_buffers(const Config& config, const Rank_table& table, Unit_status& status, const Stop_flag& stop);

    Buffer_reader* source() const { return paced_ ? paced_.get() : source_.get(); }
    Buffer_writer* output() const { return counted_ ? counted_.get() : output_.get(); }

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
};

}  // namespace eb
