#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace eb {

// The memory a buffer hands its elements out of. A transport that must
// register memory before a NIC may touch it (RDMA) registers these spans
// once, and again only when the version changes (a slot grew). Versions are
// unique in the process, so two buffers never share one.
class Memory_regions {
public:
    Memory_regions() : version_(next_version()) {}

    std::uint64_t version() const { return version_; }
    const std::vector<std::span<const std::byte>>& spans() const { return spans_; }

    // The buffer's memory is now `spans`: the old spans may be gone.
    void assign(std::vector<std::span<const std::byte>> spans) {
        spans_ = std::move(spans);
        version_ = next_version();
    }

private:
    static std::uint64_t next_version() {
        static std::atomic<std::uint64_t> last{0};
        return ++last;
    }

    std::uint64_t version_;
    std::vector<std::span<const std::byte>> spans_;
};

}  // namespace eb
