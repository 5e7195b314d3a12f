#include "buffers/generator_reader.hpp"

#include <stdexcept>
#include <string>

#include "formats/mfp.hpp"

namespace eb {

void Buffer_reader::skip_to(std::uint64_t first_event_id) {
    throw std::runtime_error("this MFP source cannot start at event " + std::to_string(first_event_id) +
                             ": only --source generator, prepared, shm or file can join a running set; restart the run instead");
}

void Generator_reader::skip_to(std::uint64_t first_event_id) { ring_.skip_to(first_event_id); }

Generator_reader::Generator_reader(std::uint32_t source_id, std::uint32_t packing_factor, const Event_model& model,
                                   std::size_t depth, Data_threads* threads)
    : source_id_(source_id),
      packing_factor_(packing_factor),
      fragment_sizes_(model, source_id),
      sizes_(packing_factor),
      slots_(depth),
      ring_(depth, packing_factor, "Generator_reader"),
      threads_(threads) {}

std::span<const std::byte> Generator_reader::next() {
    const std::uint64_t mfp = ring_.take();
    const std::uint64_t first_event = mfp * packing_factor_;
    for (std::uint32_t i = 0; i < packing_factor_; ++i) sizes_[i] = fragment_sizes_(first_event + i);
    auto& slot = slots_[ring_.slot_of(mfp)];
    const std::byte* before = slot.data();
    slot.resize(mfp_bytes(sizes_));
    if (slot.data() != before) {
        std::vector<std::span<const std::byte>> spans;
        for (const auto& each : slots_)
            if (each.capacity() != 0) spans.emplace_back(each.data(), each.capacity());
        regions_.assign(std::move(spans));
    }
    write_mfp(slot, {.source_id = source_id_, .first_event_id = first_event, .type = fragment_type(source_id_)},
              sizes_, threads_);
    return slot;
}

void Generator_reader::release() { ring_.release(); }

}  // namespace eb
