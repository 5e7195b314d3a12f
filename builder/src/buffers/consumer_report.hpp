#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "formats/mep_checker.hpp"

namespace eb {

// What the consumer of a BU's MEP ring has made of it, for the builder's
// status (and so the run's): MEPs read, their events complete and
// incomplete, MEPs and MFPs it rejected as malformed. Any consumer may publish it
// (docs/formats.md): a shared-memory segment beside the ring
// (consumer_report_name) of a magic and four 64-bit counters.
struct Consumer_counts {
    std::uint64_t meps = 0;
    std::uint64_t events_complete = 0;
    std::uint64_t events_incomplete = 0;
    std::uint64_t rejected = 0;

    friend bool operator==(const Consumer_counts&, const Consumer_counts&) = default;
};

std::string consumer_report_name(const std::string& ring);

struct Consumer_report_segment;  // the shared layout
struct Segment_unmap {
    void operator()(Consumer_report_segment* segment) const;
};
using Mapped_report = std::unique_ptr<Consumer_report_segment, Segment_unmap>;

// The consumer's end: creates the segment (replacing one a crashed
// consumer left) and removes it when it goes.
class Consumer_report_writer {
public:
    explicit Consumer_report_writer(std::string ring);
    ~Consumer_report_writer();
    Consumer_report_writer(const Consumer_report_writer&) = delete;
    Consumer_report_writer& operator=(const Consumer_report_writer&) = delete;

    void publish(const Consumer_counts& counts);

private:
    std::string name_;
    Mapped_report segment_;
};

// Per readout stream, what the consumer found (Mep_checker's tallies): a
// text file beside the ring (stream_tallies_name), a line "NAME held H
// lacked L" per stream, rewritten as the consumer goes and removed when it
// ends (it prints them then), for people and tests to read.
std::string stream_tallies_name(const std::string& ring);
std::string render_stream_tallies(const std::map<std::string, Stream_tally>& tallies);
void publish_stream_tallies(const std::string& ring, const std::map<std::string, Stream_tally>& tallies);
void remove_stream_tallies(const std::string& ring);

// The builder's end: reads the segment of the consumer there is (looking
// for a new one at most once a second), or the last one's final counts.
class Consumer_report_reader {
public:
    explicit Consumer_report_reader(std::string ring) : name_(consumer_report_name(ring)) {}
    std::optional<Consumer_counts> read();

private:
    std::string name_;
    Mapped_report segment_;
    std::uint64_t inode_ = 0;         // of the segment mapped
    std::uint64_t next_look_ns_ = 0;  // steady clock
};

}  // namespace eb
