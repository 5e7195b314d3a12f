#include "buffers/replay_reader.hpp"

#include <stdexcept>

#include "formats/wire_format.hpp"

namespace eb {

void Replay_reader::skip_to(std::uint64_t first_event_id) {
    announce_target(first_event_id);
    while (true) {
        const std::span<const std::byte> element = next();
        if (element.empty())
            throw std::runtime_error(description() + " ended before event " + std::to_string(first_event_id) +
                                     ", where the running set is; this unit cannot join it");
        if (element.size() < sizeof(Mfp_header) || load<Mfp_header>(element, 0).magic != mfp_magic) {
            put_back();
            return;
        }
        const std::uint64_t first = load<Mfp_header>(element, 0).first_event_id;
        if (first < first_event_id) {
            release();
            continue;
        }
        put_back();
        if (first == first_event_id) return;
        throw std::runtime_error(description() + " holds MFPs from event " + std::to_string(first) + " on, past event " +
                                 std::to_string(first_event_id) +
                                 " where the running set is: its writer (the readout driver) must keep every MFP "
                                 "until this unit reads or skips it");
    }
}

}  // namespace eb
