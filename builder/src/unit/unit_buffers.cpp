#include "unit/unit_buffers.hpp"

#include <algorithm>

#include "buffers/checking_writer.hpp"
#include "buffers/counted_writer.hpp"
#include "buffers/discarding_writer.hpp"
#include "buffers/file_reader.hpp"
#include "buffers/generator_reader.hpp"
#include "buffers/local_discard_writer.hpp"
#include "buffers/prepared_reader.hpp"
#include "base/log.hpp"
#include "buffers/mep_expectation.hpp"
#include "engine/mep_stream_map.hpp"
#include "buffers/paced_reader.hpp"

namespace eb {

namespace {
// Epochs whose Mep_expectation stays beside the ring.
constexpr std::size_t kept_expectations = 8;
}  // namespace

Unit_buffers::Unit_buffers(const Config& config, Rank rank, Unit_status& status, const Stop_flag& stop,
                           Data_threads& threads)
    : config_(config), status_(status), stop_(stop), threads_(threads), rank_(rank) {}

Unit_buffers::~Unit_buffers() { close_output(); }

std::string Unit_buffers::mep_ring() const { return ring_name(config_.run_name, rank_, "mep"); }

void Unit_buffers::close_output() {
    for (const std::uint32_t epoch : published_epochs_) remove_mep_expectation(mep_ring(), epoch);
    published_epochs_.clear();
    patient_.reset();
    counted_.reset();
    output_.reset();
    ring_output_ = nullptr;
    checking_output_ = nullptr;
}

void Unit_buffers::close_source() {
    cursor_.reset();
    paced_.reset();
    source_.reset();
    ring_source_ = nullptr;
    source_depth_ = 0;
}

void Unit_buffers::fit(const Rank_table& table) {
    const bool too_shallow = source_depth_ != 0 && source_depth_ < config_.cycles_held() * table.units();
    if ((!table.runs_ru(rank_) || too_shallow) && source_) close_source();
    if (table.runs_ru(rank_) && !source_) open_source(table);
    if (!table.runs_bu(rank_) && output_) {
        log_info("this rank no longer runs a BU: closing its output");
        stop_output();
        close_output();
    }
    // A failed ring stays while the unit holds ERROR, so a consumer still
    // reads what was built and learns of the failure; the next session (after
    // the reset) writes to a fresh one.
    if (output_failed_) {
        close_output();
        output_failed_ = false;
    }
    if (table.runs_bu(rank_) && !output_) open_output(table);
}

void Unit_buffers::open_source(const Rank_table& table) {
    switch (config_.source) {
        case Source_kind::generator:
            // The RU holds one MFP per live BU through a cycle (and the next
            // cycle's: Config::receives_ahead); a later table may make every rank live.
            source_depth_ = config_.cycles_held() * table.units();
            source_ = std::make_unique<Generator_reader>(rank_, config_.packing_factor, config_.event_model(),
                                                         source_depth_, &threads_);
            break;
        case Source_kind::shm: {
            log_info("waiting for the MFP ring ", ring_name(config_.run_name, rank_, "mfp"));
            auto ring = std::make_unique<Shm_ring_reader>(ring_name(config_.run_name, rank_, "mfp"), stop_);
            ring_source_ = ring.get();
            source_ = std::move(ring);
            break;
        }
        case Source_kind::file: source_ = std::make_unique<File_reader>(config_.source_file); break;
        case Source_kind::prepared:
            source_depth_ = config_.cycles_held() * table.units();
            source_ = std::make_unique<Prepared_reader>(rank_, config_.packing_factor, config_.event_model(),
                                                        source_depth_);
            break;
    }
    if (config_.rate != 0) paced_ = std::make_unique<Paced_reader>(*source_, config_.packing_factor, config_.rate, stop_);
    cursor_ = std::make_unique<Source_cursor>(paced_ ? *paced_ : *source_, config_.packing_factor);
}

void Unit_buffers::open_output(const Rank_table& table) {
    switch (config_.output) {
        case Output_kind::check: {
            Mep_checker checker(table.sources(), config_.packing_factor, config_.event_model(), status_.parse_errors(),
                                mep_stream_map(table), &threads_);
            auto checking = std::make_unique<Checking_writer>(std::move(checker), status_);
            checking_output_ = checking.get();
            output_ = std::move(checking);
            break;
        }
        case Output_kind::shm: {
            auto ring = std::make_unique<Shm_ring_writer>(mep_ring(),
                                                          config_.ring_mib << 20, stop_);
            ring_output_ = ring.get();
            status_.watch_consumer(mep_ring());
            output_ = std::move(ring);
            break;
        }
        case Output_kind::discard: output_ = std::make_unique<Discarding_writer>(); break;
    }
    // The checking writer counts what it checked; the others are counted here.
    if (checking_output_ == nullptr)
        counted_ = std::make_unique<Counted_writer>(*output_, config_.packing_factor, status_);
    // Only a ring waits for room (for its consumer): no slow consumer holds up the set.
    if (ring_output_ != nullptr)
        patient_ = std::make_unique<Local_discard_writer>(
            *counted_, std::chrono::milliseconds(config_.output_timeout_ms), config_.packing_factor, status_);
}

void Unit_buffers::expect(const Rank_table& table, std::uint32_t epoch, std::uint64_t cycle_chunk) {
    const std::uint64_t stride = std::uint64_t{config_.packing_factor} * table.bus().size();
    // Once per epoch (a table's sources and stride never change), so a
    // consumer never reads one being rewritten; the oldest go, a lagging
    // consumer having at most that many epochs' MEPs left to read.
    if (ring_output_ != nullptr && table.runs_bu(rank_) &&
        std::find(published_epochs_.begin(), published_epochs_.end(), epoch) == published_epochs_.end()) {
        const std::string ring = mep_ring();
        publish_mep_expectation(ring, {epoch, stride, table.sources(), mep_stream_map(table)});
        published_epochs_.push_back(epoch);
        if (published_epochs_.size() > kept_expectations) {
            remove_mep_expectation(ring, published_epochs_.front());
            published_epochs_.erase(published_epochs_.begin());
        }
    }
    if (checking_output_ == nullptr) return;
    Mep_checker& checker = checking_output_->checker();
    checker.expect_sources(table.sources(), mep_stream_map(table));
    const std::uint64_t first_chunk = cycle_chunk + table.bu_index(rank_);
    checker.expect_sequence(first_chunk * config_.packing_factor, stride);
}

double Unit_buffers::mfp_ring_fill() const { return ring_source_ != nullptr ? ring_source_->fill() : -1; }

double Unit_buffers::mep_ring_fill() const { return ring_output_ != nullptr ? ring_output_->fill() : -1; }

void Unit_buffers::finish_output() {
    if (ring_output_ != nullptr) ring_output_->finish();
}

void Unit_buffers::stop_output() {
    if (ring_output_ != nullptr) ring_output_->stop();
}

void Unit_buffers::fail_output() {
    if (ring_output_ != nullptr) ring_output_->fail();
    output_failed_ = true;
}

}  // namespace eb
