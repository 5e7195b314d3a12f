#pragma once

#include <memory>

#include "buffers/buffer.hpp"
#include "buffers/checking_writer.hpp"
#include "unit/config.hpp"
#include "base/data_threads.hpp"
#include "schedule/rank_table.hpp"
#include "buffers/shm_ring.hpp"
#include "buffers/source_cursor.hpp"
#include "base/stop_flag.hpp"
#include "telemetry/unit_status.hpp"

namespace eb {

// The unit's MFP source (if it runs an RU) and MEP output (if it runs a BU),
// as the command line picks them.
class Unit_buffers {
public:
    // Opens nothing yet: fit() does. The generator and the checker split
    // their work over `threads`.
    Unit_buffers(const Config& config, Rank rank, Unit_status& status, const Stop_flag& stop, Data_threads& threads);
    // Closes both (a ring output neither finished nor stopped is marked
    // failed) and removes what it published for the consumer.
    ~Unit_buffers();
    Unit_buffers(const Unit_buffers&) = delete;
    Unit_buffers& operator=(const Unit_buffers&) = delete;

    // Opens the source and the output that the rank's function in `table`
    // needs and closes those it no longer needs (a ring output marked
    // stopped): a new table may move a rank's RU or BU (a replan, a layout
    // change). Sizes fit tables of table.units() ranks: a generated source
    // opened for fewer ranks (a set stopped and resized) is opened again for
    // as many, between sessions (start_source_at sets its place).
    void fit(const Rank_table& table);

    Buffer_reader* source() const { return cursor_.get(); }
    // Before building from chunk `chunk`, with an RU: the source hands out
    // that chunk next, however the last session ended (Source_cursor).
    void start_source_at(std::uint64_t chunk) { cursor_->start_at(chunk); }
    Buffer_writer* output() const {
        return patient_ ? patient_.get() : counted_ ? counted_.get() : output_.get();
    }

    // Under a (new) table of `epoch`, from chunk `cycle_chunk` on: the
    // checking output expects the table's sources and this BU's chunks; a
    // ring output publishes them for its consumer (Mep_expectation).
    void expect(const Rank_table& table, std::uint32_t epoch, std::uint64_t cycle_chunk);
    // Fractions of the rings in use; < 0 where there is no ring.
    double mfp_ring_fill() const;
    double mep_ring_fill() const;

    // At the end of a complete run: waits until a consumer process has taken
    // every MEP, when the output is a ring, then marks the ring complete.
    void finish_output();
    // Marks a ring output stopped (ended on request) or failed (on an error),
    // so its consumer can tell either from a complete run. A failed output is
    // replaced by a fresh one at the next fit() (the session after a reset).
    void stop_output();
    void fail_output();

private:
    std::string mep_ring() const;  // the MEP ring's shared-memory name
    void close_output();
    void close_source();
    void open_source(const Rank_table& table);
    void open_output(const Rank_table& table);

    const Config& config_;
    Unit_status& status_;
    const Stop_flag& stop_;
    Data_threads& threads_;
    std::unique_ptr<Buffer_reader> source_;
    std::unique_ptr<Buffer_reader> paced_;
    std::unique_ptr<Source_cursor> cursor_;  // over paced_ or source_
    std::unique_ptr<Buffer_writer> output_;
    std::unique_ptr<Buffer_writer> counted_;
    std::unique_ptr<Buffer_writer> patient_;  // over counted_, for a ring: drops what finds no room in time
    Shm_ring_writer* ring_output_ = nullptr;
    Shm_ring_reader* ring_source_ = nullptr;
    Checking_writer* checking_output_ = nullptr;
    // The MFPs a generated source can hold at once (one per BU of a cycle);
    // 0 for a ring or a file, which hold as many as they need.
    std::size_t source_depth_ = 0;
    bool output_failed_ = false;
    std::vector<std::uint32_t> published_epochs_;  // Mep_expectations beside ring_output_
    Rank rank_;
};

}  // namespace eb
