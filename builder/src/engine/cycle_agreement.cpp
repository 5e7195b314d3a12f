#include "engine/cycle_agreement.hpp"

#include <string>

#include "base/log.hpp"

namespace eb {
namespace {

// One byte per rank, each 0 or 1; anything else is another protocol.
Membership read_flags(std::span<const std::byte> bytes, Rank sender, const char* what) {
    Membership flags(bytes.size());
    for (std::size_t rank = 0; rank < bytes.size(); ++rank) {
        flags[rank] = std::to_integer<std::uint8_t>(bytes[rank]);
        if (flags[rank] > 1)
            throw Transport_error("rank " + std::to_string(sender) + " sent a " + what + " with " +
                                  std::to_string(flags[rank]) + " for rank " + std::to_string(rank) +
                                  " (0 or 1 expected): the units speak different protocols");
    }
    return flags;
}

std::uint32_t vote_bits(bool pause, bool stop) { return (pause ? vote_pause : 0u) | (stop ? vote_stop : 0u); }

}  // namespace

Cycle_agreement::Cycle_agreement(Settings settings, const Rank_table& table, Transport& transport)
    : settings_(settings),
      table_(table),
      transport_(transport),
      rank_(transport.rank()),
      cycle_message_bytes_(cycle_message_bytes(table.units())),
      proposal_bytes_(proposal_message_bytes(table.units())),
      sent_(table.units() * cycle_message_bytes_),
      arrived_(table.units() * cycle_message_bytes_),
      proposal_(proposal_bytes_),
      proposals_arrived_(table.units() * proposal_bytes_),
      headers_(table.units()),
      lost_lists_(table.units()),
      outs_(table.units()),
      decisions_(table.units()),
      in_cycle_(table.units()),
      chunk_in_doubt_(table.units()) {
    for (const Rank peer : table.live_ranks()) {
        message_sends_.push_back({peer, slot(sent_, peer, cycle_message_bytes_)});
        message_receives_.push_back({peer, slot(arrived_, peer, cycle_message_bytes_)});
        proposal_sends_.push_back({peer, proposal_});
        proposal_receives_.push_back({peer, slot(proposals_arrived_, peer, proposal_bytes_)});
    }
}

std::span<std::byte> Cycle_agreement::slot(std::vector<std::byte>& messages, Rank rank, std::size_t bytes) const {
    return std::span(messages).subspan(rank * bytes, bytes);
}

bool Cycle_agreement::exchange_headers(std::uint64_t cycle_chunk, const Vote& vote,
                                       std::span<const std::uint64_t> mfp_bytes,
                                       std::span<const std::uint64_t> next_mfp_bytes) {
    const Rank units = table_.units();
    for (const Rank peer : table_.live_ranks()) {
        const std::span<std::byte> message = slot(sent_, peer, cycle_message_bytes_);
        store(message, 0, Cycle_header{cycle_chunk, mfp_bytes[peer], next_mfp_bytes[peer], settings_.packing_factor,
                                       settings_.epoch, vote.pending_epoch, vote_bits(vote.pause, vote.stop)});
        for (Rank rank = 0; rank < units; ++rank)
            message[sizeof(Cycle_header) + rank] = std::byte{transport_.lost(rank) ? std::uint8_t{1} : std::uint8_t{0}};
        seal(message);
    }
    if (!transport_.transfer(message_sends_, message_receives_)) return false;
    read_headers(cycle_chunk);
    return true;
}

bool Cycle_agreement::settle(std::uint64_t cycle_chunk) {
    propose();
    if (!transport_.transfer(proposal_sends_, proposal_receives_)) return false;
    read_proposals();
    follow(cycle_chunk);
    return true;
}

void Cycle_agreement::read_headers(std::uint64_t cycle_chunk) {
    const Rank units = table_.units();
    for (const Rank peer : table_.live_ranks()) {
        lost_lists_[peer].reset();
        if (transport_.lost(peer)) continue;  // no header, or none to count on
        const std::span<const std::byte> message = slot(arrived_, peer, cycle_message_bytes_);
        if (!is_sealed(message)) {
            lose_corrupted(peer, "cycle message");
            continue;
        }
        headers_[peer] = load<Cycle_header>(message, 0);
        check_header(peer, cycle_chunk);
        if (peer != rank_)
            lost_lists_[peer] = read_flags(message.subspan(sizeof(Cycle_header), units), peer, "lost list");
    }
}

void Cycle_agreement::check_header(Rank from, std::uint64_t cycle_chunk) const {
    const Cycle_header& header = headers_[from];
    const std::string who = "rank " + std::to_string(from);
    if (header.epoch != settings_.epoch)
        throw Transport_error(who + " runs rank table epoch " + std::to_string(header.epoch) + ", this unit epoch " +
                              std::to_string(settings_.epoch) + ": the units switched tables at different cycles");
    if (header.cycle_chunk != cycle_chunk)
        throw Transport_error(who + " is at chunk " + std::to_string(header.cycle_chunk) + ", this unit at " +
                              std::to_string(cycle_chunk) + ": the units are out of step");
    if (header.event_count != settings_.packing_factor)
        throw Transport_error(who + " packs " + std::to_string(header.event_count) + " events per MFP, this unit " +
                              std::to_string(settings_.packing_factor) + ": every unit needs the same --packing-factor");
    const bool expects_mfp = table_.runs_ru(from) && settings_.has_output;
    if (header.bytes > max_mfp_bytes || (header.bytes != 0) != expects_mfp)
        throw Transport_error(who + " announced an MFP of " + std::to_string(header.bytes) + " bytes; expected " +
                              (expects_mfp ? "1.." + std::to_string(max_mfp_bytes) : std::string("none")));
    if (header.next_bytes > max_mfp_bytes || (header.next_bytes != 0 && !expects_mfp))
        throw Transport_error(who + " announced an MFP of " + std::to_string(header.next_bytes) +
                              " bytes for the next cycle; expected " +
                              (expects_mfp ? "0.." + std::to_string(max_mfp_bytes) : std::string("none")));
    if (header.votes > (vote_pause | vote_stop))
        throw Transport_error(who + " sent votes " + std::to_string(header.votes) +
                              " (pause 1, stop 2): the units speak different protocols");
}

void Cycle_agreement::propose() {
    const Rank units = table_.units();
    Membership own(units);  // as it stands now: losses during the cycle's data count
    for (Rank rank = 0; rank < units; ++rank) own[rank] = transport_.lost(rank) ? 1 : 0;
    lost_lists_[rank_] = std::move(own);
    const Membership_proposal proposal =
        propose_membership(rank_, table_.live_ranks(), lost_lists_, reported_before_);
    reported_before_ = proposal.reported;
    votes_.clear();
    for (const Rank peer : table_.live_ranks()) {
        // Not heard, or out; its own votes count even when it is out (alone,
        // it still stops, pauses and switches tables when told).
        if (!lost_lists_[peer] || (proposal.out[peer] && peer != rank_)) continue;
        const Cycle_header& header = headers_[peer];
        votes_.push_back({header.pending_epoch, (header.votes & vote_pause) != 0, (header.votes & vote_stop) != 0});
    }
    const Cycle_decision decision = decide(votes_, settings_.epoch);
    store(std::span(proposal_), 0, Proposal_header{decision.switch_to, vote_bits(decision.pause, decision.stop)});
    for (Rank rank = 0; rank < table_.units(); ++rank)
        proposal_[sizeof(Proposal_header) + rank] = std::byte{proposal.out[rank] ? std::uint8_t{1} : std::uint8_t{0}};
    seal(proposal_);
}

void Cycle_agreement::lose_corrupted(Rank peer, const char* what) {
    transport_.lose(peer, Link_failure::error,
                    std::string("its ") + what + " failed its CRC-32: bytes changed on the way, so the link is broken");
}

void Cycle_agreement::read_proposals() {
    for (const Rank peer : table_.live_ranks()) {
        outs_[peer].reset();
        if (transport_.lost(peer)) continue;
        const std::span<const std::byte> message =
            peer == rank_ ? std::span<const std::byte>(proposal_) : slot(proposals_arrived_, peer, proposal_bytes_);
        if (!is_sealed(message)) {
            lose_corrupted(peer, "proposal");
            continue;
        }
        const auto header = load<Proposal_header>(message, 0);
        if (header.votes > (vote_pause | vote_stop) || (header.switch_to != 0 && header.switch_to <= settings_.epoch))
            throw Transport_error("rank " + std::to_string(peer) + " proposed votes " + std::to_string(header.votes) +
                                  " and a switch to epoch " + std::to_string(header.switch_to) +
                                  " under epoch " + std::to_string(settings_.epoch) +
                                  ": the units speak different protocols");
        decisions_[peer] = {header.switch_to, (header.votes & vote_pause) != 0, (header.votes & vote_stop) != 0};
        outs_[peer] = read_flags(message.subspan(sizeof(Proposal_header), table_.units()), peer, "proposal");
    }
}

void Cycle_agreement::follow(std::uint64_t cycle_chunk) {
    const Following following = follow_proposals(rank_, table_.live_ranks(), outs_);
    const Rank followed = following.followed;
    const Membership& out = *outs_[followed];
    const bool put_out = following.put_out, sits_out = following.sits_out;
    decision_ = decisions_[followed];
    leads_ = following.leads;
    // Sitting out, it stays: when the others lost that rank too (it stopped
    // in the middle of the rounds) all follow one proposal again next cycle;
    // when they did not, the set acts on this unit's report within two
    // cycles. Putting itself out for good would let one unit stopped at the
    // wrong moment take the whole set apart.
    if (sits_out)
        log_warning("it did not hear a rank that rank ", followed, "'s proposal keeps in, so it cannot know what "
                    "the set decides at chunk ", cycle_chunk, ": it sits the cycle out, its chunk counted in doubt, "
                    "and stays in the set");
    if (put_out && !was_out_)
        log_warning(followed == rank_ ? std::string("having lost every peer, it cannot tell whether they died or it "
                                                    "was cut off; it puts")
                                      : "rank " + std::to_string(followed) + "'s proposal, which the set follows, puts",
                    " this unit out of the set at chunk ", cycle_chunk,
                    ": it cycles on alone and counts no event until a new rank table");
    chunk_in_doubt_[rank_] = sits_out;
    was_out_ = put_out;
    for (const Rank peer : table_.live_ranks()) {
        if (peer == rank_) continue;
        if ((put_out || out[peer] != 0) && !transport_.lost(peer))
            transport_.lose(peer, Link_failure::excluded,
                            put_out ? "the set put this unit out at chunk " + std::to_string(cycle_chunk)
                                    : "rank " + std::to_string(followed) +
                                          "'s proposal, which the set follows, puts it out at chunk " +
                                          std::to_string(cycle_chunk) + " (a link of it is broken)");
        in_cycle_[peer] = out[peer] == 0;
        chunk_in_doubt_[peer] = following.own_followed && (in_cycle_[peer] ? transport_.lost(peer) : sits_out);
    }
    in_cycle_[rank_] = !put_out && !sits_out;
}

}  // namespace eb
