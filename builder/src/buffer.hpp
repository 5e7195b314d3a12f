#pragma once

#include <cstddef>
#include <span>

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

    // Gives the oldest held element back to the buffer.
    virtual void release() = 0;
};

// Hands out room for elements and publishes them when complete.
class Buffer_writer {
public:
    virtual ~Buffer_writer() = default;

    // Room for one element of exactly `bytes` bytes, writable until committed.
    virtual std::span<std::byte> allocate(std::size_t bytes) = 0;

    // Publishes the oldest allocated element to the reading side.
    virtual void commit() = 0;
};

}  // namespace eb
