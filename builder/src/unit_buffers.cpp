#include "unit_buffers.hpp"

#include "checking_writer.hpp"
#include "counted_writer.hpp"
#include "file_reader.hpp"
#include "generator_reader.hpp"
#include "log.hpp"
#include "paced_reader.hpp"

namespace eb {

Unit_buffers::Unit_buffers(const Config& config, Rank rank, const Rank_table& table, Unit_status& status,
                           const Stop_flag& stop)
    : rank_(rank), packing_factor_(config.packing_factor) {
    if (table.runs_ru(rank)) {
        switch (config.source) {
            case Source_kind::generator:
                // The RU holds one MFP per live BU through a cycle; a later
                // table may make every rank live.
                source_ = std::make_unique<Generator_reader>(rank, config.packing_factor, config.event_model(),
                                                             table.units());
                break;
            case Source_kind::shm: {
                log_info("waiting for the MFP ring ", ring_name(config.run_name, rank, "mfp"));
                auto ring = std::make_unique<Shm_ring_reader>(ring_name(config.run_name, rank, "mfp"), stop);
                ring_source_ = ring.get();
                source_ = std::move(ring);
                break;
            }
            case Source_kind::file: source_ = std::make_unique<File_reader>(config.source_file); break;
        }
        if (config.rate != 0) paced_ = std::make_unique<Paced_reader>(*source_, config.packing_factor, config.rate, stop);
    }
    if (table.runs_bu(rank)) {
        switch (config.output) {
            case Output_kind::check: {
                Mep_checker checker(table.rus(), config.packing_factor, config.event_model(), status.parse_errors());
                auto checking = std::make_unique<Checking_writer>(std::move(checker), status);
                checking_output_ = checking.get();
                output_ = std::move(checking);
                expect(table, 0);
                break;
            }
            case Output_kind::shm: {
                auto ring = std::make_unique<Shm_ring_writer>(ring_name(config.run_name, rank, "mep"),
                                                              config.ring_mib << 20, stop);
                ring_output_ = ring.get();
                output_ = std::move(ring);
                counted_ = std::make_unique<Counted_writer>(*output_, config.packing_factor, status);
                break;
            }
        }
    }
}

void Unit_buffers::expect(const Rank_table& table, std::uint64_t cycle_chunk) {
    if (checking_output_ == nullptr) return;
    Mep_checker& checker = checking_output_->checker();
    checker.expect_sources(table.rus());
    const std::uint64_t first_chunk = cycle_chunk + table.bu_index(rank_);
    checker.expect_sequence(first_chunk * packing_factor_, std::uint64_t{packing_factor_} * table.bus().size());
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
}

}  // namespace eb
