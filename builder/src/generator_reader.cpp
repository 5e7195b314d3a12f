#include "generator_reader.hpp"

#include <stdexcept>

#include "mfp.hpp"

namespace eb {

Generator_reader::Generator_reader(std::uint32_t source_id, std::uint32_t packing_factor,
                                   std::uint32_t fragment_size, std::size_t depth)
    : source_id_(source_id),
      packing_factor_(packing_factor),
      fragment_size_(fragment_size),
      slots_(depth, std::vector<std::byte>(mfp_bytes(packing_factor, fragment_size))) {}

std::span<const std::byte> Generator_reader::next() {
    if (held_ == slots_.size())
        throw std::logic_error("Generator_reader: every slot is held; release one first");
    auto& slot = slots_[next_mfp_ % slots_.size()];
    write_mfp(slot, Mfp_spec{.source_id = source_id_,
                             .first_event_id = next_mfp_ * packing_factor_,
                             .fragment_count = packing_factor_,
                             .payload_bytes = fragment_size_});
    ++next_mfp_;
    ++held_;
    return slot;
}

void Generator_reader::release() {
    if (held_ == 0) throw std::logic_error("Generator_reader: release without a held MFP");
    --held_;
}

}  // namespace eb
