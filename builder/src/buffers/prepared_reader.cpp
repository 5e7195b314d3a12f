#include "buffers/prepared_reader.hpp"

#include <cstddef>

#include "buffers/generator_reader.hpp"
#include "formats/wire_format.hpp"

namespace eb {

Prepared_reader::Prepared_reader(std::uint32_t source_id, std::uint32_t packing_factor, const Event_model& model,
                                 std::size_t depth)
    : packing_factor_(packing_factor), slots_(depth), ring_(depth, packing_factor, "Prepared_reader") {
    Generator_reader generator(source_id, packing_factor, model, 1);
    std::vector<std::span<const std::byte>> spans;
    for (auto& slot : slots_) {
        const std::span<const std::byte> mfp = generator.next();
        slot.assign(mfp.begin(), mfp.end());
        generator.release();
        spans.emplace_back(slot);
    }
    regions_.assign(std::move(spans));
}

std::span<const std::byte> Prepared_reader::next() {
    const std::uint64_t mfp = ring_.take();
    std::vector<std::byte>& slot = slots_[ring_.slot_of(mfp)];
    store(std::span(slot), offsetof(Mfp_header, first_event_id), mfp * packing_factor_);
    return slot;
}

}  // namespace eb
