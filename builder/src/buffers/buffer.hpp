#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "buffers/memory_regions.hpp"
#include "formats/wire_format.hpp"

namespace eb {

// Buffer interfaces of the reference design (section III-B). Elements are byte
// blocks, so the same pair serves MFPs (source -> RU) and MEPs (BU -> output).

// Hands out elements in place, oldest first; several may be held at once.
class Buffer_reader {
public:
    virtual ~Buffer_reader() = default;

    // The next element; it stays valid and unchanged until released. Empty
    // when the buffer has ended (a replayed file or a closed ring).
    virtual std::span<const std::byte> next() = 0;

    // As next(), but only what is there now: empty where next() would wait
    // (a ring its writer has not filled that far, a pace not yet due) as
    // well as at the end. The RU takes the next cycle's MFPs ahead with it,
    // so a ring too small to hold two cycles slows nothing and locks
    // nothing. A source that never waits hands out next().
    virtual std::span<const std::byte> next_if_ready() { return next(); }

    // Gives the oldest held element back to the buffer.
    virtual void release() = 0;

    // Where next() hands elements out from (for a transport that registers
    // memory with the NIC).
    virtual const Memory_regions& regions() const = 0;

    // Moves on so that the next element starts at event `first_event_id`,
    // when a unit joins a running set. Only a source that can seek (the
    // generator, prepared MFPs, a readout driver's ring, a file) supports
    // it; with none held.
    virtual void skip_to(std::uint64_t first_event_id);
};

// Hands out room for elements and publishes them when complete.
class Buffer_writer {
public:
    virtual ~Buffer_writer() = default;

    // Room for one element of exactly `bytes` bytes (at most max_element()),
    // writable until committed.
    virtual std::span<std::byte> allocate(std::size_t bytes) = 0;
    // As allocate(), waiting at most `patience` for room; empty if none came
    // by then (a consumer that is behind). A writer that never waits for
    // room (in process) just allocates.
    virtual std::span<std::byte> allocate_within(std::size_t bytes, std::chrono::milliseconds) {
        return allocate(bytes);
    }
    // The largest element allocate() takes.
    virtual std::size_t max_element() const { return max_mep_bytes; }

    // Publishes the oldest allocated element to the reading side.
    virtual void commit() = 0;

    // Publishes the oldest allocated element, which lacks data (a lost
    // source): a writer that counts events counts its events incomplete.
    virtual void commit_incomplete() { commit(); }

    // Takes back the newest allocated, uncommitted element: it is never published.
    virtual void discard() = 0;

    // Where allocate() hands room out from (for a transport that registers
    // memory with the NIC).
    virtual const Memory_regions& regions() const = 0;
};

}  // namespace eb
