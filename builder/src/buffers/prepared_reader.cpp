#include "prepared_reader.hpp"

#include <cstddef>
#include <stdexcept>

#include "generator_reader.hpp"
#include "wire_format.hpp"

namespace eb {

Prepared_reader::Prepared_reader(std::uint32_t source_id, std::uint32_t packing_factor, const Event_model& model,
                                 std::size_t depth)
    : packing_factor_(packing_factor), slots_(depth) {
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
    if (held_ == slots_.size()) throw std::logic_error("Prepared_reader: every slot is held; release one first");
    std::vector<std::byte>& slot = slots_[next_mfp_ % slots_.size()];
    store(std::span(slot), offsetof(Mfp_header, first_event_id), next_mfp_ * packing_factor_);
    ++next_mfp_;
    ++held_;
    return slot;
}

void Prepared_reader::release() {
    if (held_ == 0) throw std::logic_error("Prepared_reader: release without a held MFP");
    --held_;
}

void Prepared_reader::skip_to(std::uint64_t first_event_id) {
    if (held_ != 0 || first_event_id % packing_factor_ != 0)
        throw std::logic_error("Prepared_reader: skip_to with MFPs held or inside an MFP");
    next_mfp_ = first_event_id / packing_factor_;
}

}  // namespace eb
