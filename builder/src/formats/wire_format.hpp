#pragma once

// Byte layouts that cross the network or the output buffer. All are read and
// written with memcpy (load/store below), never by casting buffer pointers.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "formats/seal.hpp"

namespace eb {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; add byte swapping for this host");

// Versions of the two packet formats (docs/formats.md); a reader refuses
// any other. The MEP went to 3 with its stream map.
inline constexpr std::uint16_t mfp_version = 2;
inline constexpr std::uint16_t mep_version = 3;

// Every fragment, MFP and MEP starts on this boundary so headers stay aligned.
inline constexpr std::size_t wire_alignment = 8;

constexpr std::uint64_t align_up(std::uint64_t bytes) {
    return (bytes + wire_alignment - 1) & ~std::uint64_t{wire_alignment - 1};
}

// Largest MFP a unit generates or accepts; bounds the allocation a corrupt or
// hostile size announcement can cause.
inline constexpr std::uint64_t max_mfp_bytes = std::uint64_t{1} << 30;
// Largest MEP an output allocates unless it holds less (a shared-memory
// ring): an LHCb-size MEP, 326 MFPs of 30 000 fragments, is about 1 GiB.
inline constexpr std::uint64_t max_mep_bytes = std::uint64_t{4} << 30;

// Multi-fragment packet (docs/formats.md): this header, then `fragment_count`
// u8 fragment types, then as many u16 payload sizes, then the payloads, each
// starting on a 2^align_log2 boundary from the MFP start. Fragment i belongs
// to event first_event_id + i: fragments of an MFP are consecutive events.
inline constexpr std::uint16_t mfp_magic = 0x40CE;  // as the LHCb Tell40 MFP
struct Mfp_header {
    std::uint16_t magic;
    std::uint16_t version;
    std::uint32_t fragment_count;
    std::uint64_t first_event_id;
    std::uint64_t total_bytes;  // header, tables, payloads and padding
    std::uint32_t source_id;
    std::uint8_t align_log2;
    std::uint8_t reserved[3];
};
// Payload alignment this implementation writes; readers honour the header's.
inline constexpr std::uint8_t mfp_align_log2 = 3;
// Largest alignment a reader accepts: 4 KiB pages.
inline constexpr std::uint8_t max_mfp_align_log2 = 12;
// A fragment's size is a u16 in the MFP table.
inline constexpr std::uint32_t max_fragment_bytes = 0xFFFF;

// Fragment types. A source that lost an MFP (rejected as corrupt) sends one of
// `missing` fragments of size 0 instead, so the schedule and event ids stay
// in step and the consumer counts those events as incomplete.
inline constexpr std::uint8_t fragment_type_missing = 0;

// Multi-event packet: this header, then `source_count` uint64 offsets (from the
// MEP start) of one MFP per source, then the stream map (stream_map.hpp:
// which readout streams each slot holds and which the MEP lacks), then the MFPs.
inline constexpr std::uint16_t mep_magic = 0xCEFA;  // as the LHCb MEP
struct Mep_header {
    std::uint16_t magic;
    std::uint16_t version;
    std::uint32_t source_count;
    std::uint32_t event_count;
    std::uint32_t epoch;  // of the rank table the MEP was built under
    std::uint64_t first_event_id;
    std::uint64_t total_bytes;        // header, offsets table, stream map and MFPs
    std::uint32_t stream_map_bytes;   // a multiple of 8
    std::uint32_t reserved;           // 0
};

// What every live unit tells every other at the start of a cycle: the RU's
// MFP size for that BU, so the BU can place it in the MEP before any of it
// arrives (reference design, section III-B), and the sender's votes, from
// which every unit takes the same decision at the end of the cycle
// (docs/control-api.md). The size of the next cycle's MFP comes along where
// the RU has it already, so the BU can lay out that MEP and post its
// receives as soon as the set has decided to go on (--verbs-depth 2).
inline constexpr std::uint32_t vote_pause = 1u << 0;
inline constexpr std::uint32_t vote_stop = 1u << 1;
struct Cycle_header {
    std::uint64_t cycle_chunk;  // chunk of the BU of index 0 in this cycle
    std::uint64_t bytes;        // the MFP for the receiver; 0 when there is none
    std::uint64_t next_bytes;   // the receiver's MFP of the next cycle; 0: none, or not announced
    std::uint32_t event_count;  // per MFP: the packing factor
    std::uint32_t epoch;        // the table this cycle runs under
    std::uint32_t pending_epoch;  // newest table the sender holds (== epoch if none newer)
    std::uint32_t votes;          // vote_pause | vote_stop
};

// A cycle header travels with its sender's lost list, one byte per rank of
// the table (1 for a rank it has lost), and a seal (seal.hpp).
inline constexpr std::size_t cycle_message_bytes(std::size_t units) { return sizeof(Cycle_header) + units + seal_bytes; }

// Second message of a cycle: the sender's proposal, the decision it takes
// (a table switch, votes: as in Cycle_header) followed by who is out of the
// cycle, one byte per rank (1: out), and a seal.
struct Proposal_header {
    std::uint32_t switch_to;  // 0: keep the table
    std::uint32_t votes;      // vote_pause | vote_stop: what the set does
};
inline constexpr std::size_t proposal_message_bytes(std::size_t units) { return sizeof(Proposal_header) + units + seal_bytes; }

static_assert(sizeof(Mfp_header) == 32);
static_assert(sizeof(Mep_header) == 40);
static_assert(sizeof(Cycle_header) == 40);
static_assert(sizeof(Proposal_header) == 8);

// Reads a T at `offset`; the caller has checked that it lies within `bytes`.
template <class T>
T load(std::span<const std::byte> bytes, std::size_t offset) {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    std::memcpy(&value, bytes.data() + offset, sizeof(T));
    return value;
}

// Writes `value` at `offset`; the caller has checked that it fits in `bytes`.
template <class T>
void store(std::span<std::byte> bytes, std::size_t offset, const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

}  // namespace eb
