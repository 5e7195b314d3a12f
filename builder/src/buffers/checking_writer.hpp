#pragma once

#include <cstdint>
#include <vector>

#include "buffers/buffer.hpp"
#include "formats/mep_checker.hpp"
#include "buffers/mep_tally.hpp"

namespace eb {

// In-process consumer of MEPs: every committed MEP is checked event by event
// and counted in the unit status. Holds one MEP at a time in a reused buffer.
class Checking_writer final : public Buffer_writer {
public:
    Checking_writer(Mep_checker checker, Mep_tally& tally);

    std::span<std::byte> allocate(std::size_t bytes) override;
    void commit() override;
    void discard() override;
    const Memory_regions& regions() const override { return regions_; }

    Mep_checker& checker() { return checker_; }

private:
    Mep_checker checker_;
    Mep_tally& tally_;
    std::vector<std::byte> mep_;
    bool allocated_ = false;
    Memory_regions regions_;  // mep_, whole capacity; changes when it grows
    std::uint64_t damaged_meps_ = 0;
};

}  // namespace eb
