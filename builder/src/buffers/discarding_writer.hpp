#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "buffers/buffer.hpp"

namespace eb {

// An output that assembles MEPs and drops them: --output discard, for
// measuring the data mover alone (iperf3 also throws its bytes away). Its
// MEPs are neither checked nor handed on; Counted_writer counts them. Buffers
// are reused, so after the first few MEPs nothing is allocated and the
// regions stay as they are.
class Discarding_writer final : public Buffer_writer {
public:
    std::span<std::byte> allocate(std::size_t bytes) override {
        std::vector<std::byte> buffer;
        if (!spare_.empty()) {
            buffer = std::move(spare_.back());
            spare_.pop_back();
        }
        const std::byte* before = buffer.data();
        buffer.resize(bytes);
        held_.push_back(std::move(buffer));
        if (held_.back().data() != before) show_regions();
        return held_.back();
    }
    void commit() override {
        spare_.push_back(std::move(held_.front()));
        held_.pop_front();
    }
    void discard() override {
        spare_.push_back(std::move(held_.back()));
        held_.pop_back();
    }
    const Memory_regions& regions() const override { return regions_; }

private:
    void show_regions() {
        std::vector<std::span<const std::byte>> spans;
        for (const auto* buffers : {&held_, &spare_})
            for (const auto& buffer : *buffers) spans.emplace_back(buffer.data(), buffer.capacity());
        regions_.assign(std::move(spans));
    }
    std::deque<std::vector<std::byte>> held_;  // allocated, oldest first
    std::deque<std::vector<std::byte>> spare_;
    Memory_regions regions_;  // every buffer, held or spare
};

}  // namespace eb
