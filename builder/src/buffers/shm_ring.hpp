#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "buffers/buffer.hpp"
#include "buffers/replay_reader.hpp"
#include "base/stop_flag.hpp"

namespace eb {

// A single-producer single-consumer ring of variable-size elements in a named
// POSIX shared-memory segment, between two processes (docs/formats.md):
//   - the writer creates the segment and unlinks it on exit; a segment left
//     by a writer that died is detected by its pid and reclaimed;
//   - head (published bytes) and tail (released bytes) are atomics, stored
//     with release and loaded with acquire, so an element is read only after
//     it was fully written, and overwritten only after it was released;
//   - either side dying cannot corrupt the other: a dead writer leaves only
//     complete, published elements; a dead reader is noticed by its pid and
//     a new reader may take its place, resuming from the last release.
// Waiting for room or data polls the other side's progress and liveness.

// The segment name of a unit's ring, e.g. /eb-run1-3-mep.
std::string ring_name(const std::string& run, std::uint32_t rank, const char* what);

// The other side broke the ring's contract or died.
class Ring_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Ring_control;

// How the writer left the ring (the `closed` word of the control block).
enum class Ring_end : std::uint32_t {
    open = 0,      // still writing
    complete = 1,  // finished: every element it meant to write was published
    stopped = 2,   // asked to stop (SIGTERM/SIGINT) before finishing
    failed = 3,    // gave up on an error; elements are missing
};
const char* ring_end_name(Ring_end end);

// Maps a segment; shared by both ends.
class Ring_mapping {
public:
    Ring_mapping() = default;
    Ring_mapping(void* base, std::size_t bytes) : base_(base), bytes_(bytes) {}
    Ring_mapping(Ring_mapping&& other) noexcept;
    Ring_mapping& operator=(Ring_mapping&& other) noexcept;
    ~Ring_mapping();

    explicit operator bool() const { return base_ != nullptr; }
    Ring_control& control() const { return *static_cast<Ring_control*>(base_); }
    std::byte* data() const;
    std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(base_), bytes_}; }

private:
    void* base_ = nullptr;
    std::size_t bytes_ = 0;
};

class Shm_ring_writer final : public Buffer_writer {
public:
    // Creates `name` with `capacity` data bytes (rounded up to 4 KiB),
    // reclaiming a stale one; throws if a live writer holds it.
    Shm_ring_writer(std::string name, std::size_t capacity, const Stop_flag& stop);
    // Marks the ring failed unless finish() or stop() came first, and unlinks it.
    ~Shm_ring_writer() override;

    // Waits for room; throws Stopped, or Ring_error if the reader died.
    std::span<std::byte> allocate(std::size_t bytes) override;
    std::span<std::byte> allocate_within(std::size_t bytes, std::chrono::milliseconds patience) override;
    void discard() override;
    // Fraction of the ring published or allocated and not yet released.
    double fill() const;
    void commit() override;
    const Memory_regions& regions() const override { return regions_; }

    // Largest element that fits: half the ring, so two are always in flight.
    std::size_t max_element() const override;

    // Waits until the reader has released every committed element, so none
    // is lost by closing; throws Stopped.
    void drain();

    // The end of a complete run: drain(), then marks the ring complete.
    void finish();
    // Marks the ring stopped: the run ended early on request, not on error.
    void stop();
    // Marks the ring failed now (the destructor would, later).
    void fail();
    // As an MFP ring: the event the reader skips to (joining a running
    // set), 0 when it asked for none: a writer that can seek goes there
    // rather than make every MFP before it.
    std::uint64_t wanted_event() const;

private:
    std::span<std::byte> reserve(std::size_t bytes, std::optional<std::chrono::steady_clock::time_point> deadline);
    void check_reader();
    void close(Ring_end end);

    std::string name_;
    Ring_mapping map_;
    std::uint64_t capacity_;
    const Stop_flag& stop_;
    std::uint64_t reserved_ = 0;         // end of the last allocation
    std::deque<std::uint64_t> pending_;  // ends of allocations not committed yet
    Ring_end end_ = Ring_end::open;
    Memory_regions regions_;  // the whole mapping
};

class Shm_ring_reader final : public Replay_reader {
public:
    // Attaches to `name`, waiting for the writer to create it; throws Stopped,
    // or Ring_error if another live reader holds it.
    Shm_ring_reader(std::string name, const Stop_flag& stop);
    ~Shm_ring_reader() override;  // leaves the reader slot free

    // The next element; empty once the writer closed the ring as complete
    // or stopped and every element was read (end() says which). Throws
    // Stopped, or Ring_error if the writer died or failed, or an element
    // header is out of bounds.
    std::span<const std::byte> next() override;
    // Empty while the writer has published nothing more.
    std::span<const std::byte> next_if_ready() override;
    // Fraction of the ring published and not yet released.
    double fill() const;
    // How the writer closed the ring, once next() returned empty.
    Ring_end end() const { return end_; }
    void release() override;
    const Memory_regions& regions() const override { return regions_; }

    pid_t writer_pid() const;
    // Whether this reader took over a ring another reader had already read
    // from (it resumes after that reader's last release).
    bool resumed() const { return resumed_; }

private:
    void put_back() override;
    void announce_target(std::uint64_t first_event_id) override;
    std::string description() const override { return "ring " + name_; }

    std::string name_;
    Ring_mapping map_;
    std::uint64_t capacity_ = 0;
    const Stop_flag& stop_;
    Memory_regions regions_;  // the whole mapping
    std::uint64_t read_ = 0;          // end of the last element handed out
    bool resumed_ = false;
    Ring_end end_ = Ring_end::open;
    std::deque<std::uint64_t> held_;  // ends of elements not released yet
};

}  // namespace eb
