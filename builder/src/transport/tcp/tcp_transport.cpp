#include "transport/tcp/tcp_transport.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/log.hpp"
#include "base/socket.hpp"

namespace eb {

namespace {
// Beats per peer timeout: a late beat or two is no silence.
constexpr int beats_per_timeout = 4;
}  // namespace

Tcp_transport::Tcp_transport(Rank rank, Tcp_mesh mesh, const Stop_flag& stop, Loss_observer on_loss,
                             Liveness liveness, Busy_poll busy_poll, Data_threads* threads)
    : rank_(rank),
      mesh_(Tcp_mesh::empty(mesh.to.size(), mesh.streams)),
      stop_(stop),
      on_loss_(std::move(on_loss)),
      liveness_(liveness),
      busy_poll_(busy_poll),
      lost_(mesh_.to.size()),
      cut_(std::make_unique<std::atomic<bool>[]>(mesh_.to.size())),
      shards_(threads != nullptr ? threads->size() : 1),
      self_(rank, units(), "Tcp_transport"),
      heartbeat_(units(), std::max<Clock::duration>(liveness.peer_timeout / beats_per_timeout,
                                                    std::chrono::milliseconds(1))),
      threads_(threads) {
    connect(std::move(mesh));
}

void Tcp_transport::connect(Tcp_mesh joined) {
    if (joined.streams != mesh_.streams)
        throw std::logic_error("Tcp_transport: a mesh of " + std::to_string(joined.streams) + " streams joined one of " +
                               std::to_string(mesh_.streams));
    for (Rank peer = 0; peer < units(); ++peer) {
        if (!joined.to[peer] && !joined.from[peer]) continue;
        for (unsigned stream = 0; stream < mesh_.streams; ++stream) {
            if (Fd& to = joined.to_stream(peer, stream)) mesh_.to_stream(peer, stream) = std::move(to);
            if (Fd& from = joined.from_stream(peer, stream)) mesh_.from_stream(peer, stream) = std::move(from);
        }
        if (mesh_.to[peer] && mesh_.from[peer]) {
            lost_[peer] = false;
            heartbeat_.watch(peer, mesh_.to[peer].get(), mesh_.from[peer].get());
        }
    }
}

void Tcp_transport::close_connections(Rank peer) {
    heartbeat_.forget(peer);
    for_each_connection(peer, [](Fd& connection) {
        if (connection) ::shutdown(connection.get(), SHUT_RDWR);
        connection.reset();
    });
}

template <typename Visit>
void Tcp_transport::for_each_connection(Rank peer, Visit visit) {
    for (unsigned stream = 0; stream < mesh_.streams; ++stream) {
        visit(mesh_.to_stream(peer, stream));
        visit(mesh_.from_stream(peer, stream));
    }
}

void Tcp_transport::disconnect(Rank peer) {
    close_connections(peer);
    lost_[peer] = false;
}

void Tcp_transport::lose(Rank peer, Link_failure failure, const std::string& detail) {
    if (lost_[peer]) return;
    lost_[peer] = true;
    cut_[peer].store(false, std::memory_order_relaxed);  // lost_ says it from now on
    // Closing both directions tells a peer that is still alive at once.
    close_connections(peer);
    log_warning("lost rank ", peer, " (", link_failure_name(failure), "): ", detail,
                "; building on without it");
    if (on_loss_) on_loss_(peer, failure, detail);
}

void Tcp_transport::post(std::span<const Send> sends, std::span<const Receive> receives) {
    self_.check_ranks(sends, receives);
    std::vector<Operation>& operations = shards_[0].operations;
    operations.clear();
    for (const Send& send : sends)
        if (send.peer != rank_ && !lost_[send.peer])
            operations.push_back({mesh_.to[send.peer].get(), send.peer, send.data.data(), nullptr, send.data.size()});
    for (const Receive& receive : receives)
        if (receive.peer != rank_ && !lost_[receive.peer])
            operations.push_back(
                {mesh_.from[receive.peer].get(), receive.peer, nullptr, receive.into.data(), receive.into.size()});
    for (const Operation& operation : operations)
        if (operation.fd < 0)
            throw std::logic_error("Tcp_transport: no connection to rank " + std::to_string(operation.peer));
    self_.transfer(sends, receives);  // the local shortcut: one copy, no socket
}

bool Tcp_transport::transfer(std::span<const Send> sends, std::span<const Receive> receives) {
    // Checked up front too: a transfer that is all local never reaches poll().
    if (stop_.requested()) return false;
    post(sends, receives);
    return drive_parts(1, nullptr);
}

bool Tcp_transport::transfer_until(std::span<const Send> sends, std::span<const Receive> receives,
                                   const Deadline& deadline) {
    if (stop_.requested()) return false;
    post(sends, receives);
    return drive_parts(1, &deadline);
}

bool Tcp_transport::drive_parts(unsigned parts, const Deadline* deadline, bool copy) {
    std::array<bool, Data_threads::max_threads> done{};
    const auto part = [&](unsigned index) {
        if (copy) copy_to_self(index, parts);
        done[index] = drive(shards_[index], deadline);
    };
    // The peers the parts cut off are lost however the drive ends.
    const auto lose_all_noted = [&] {
        for (unsigned index = 0; index < parts; ++index) lose_noted(shards_[index]);
    };
    try {
        if (threads_ != nullptr) threads_->run(parts, part);
        else part(0);  // parts is 1: a single shard
    } catch (...) {
        lose_all_noted();
        throw;
    }
    lose_all_noted();
    return std::all_of(done.begin(), done.begin() + parts, [](bool part_done) { return part_done; });
}

std::unique_ptr<Registered_memory> Tcp_transport::register_memory(std::span<const std::byte>) {
    return std::make_unique<Registered_memory>();  // the kernel copies: nothing to register
}

void Tcp_transport::post_data(std::span<const Send> sends, std::span<const Receive> receives) {
    self_.check_ranks(sends, receives);
    for (const Receive& receive : receives) {
        if (receive.peer == rank_) self_.post_receive(receive.into);
        else if (!lost_[receive.peer]) post_slices(receive.peer, nullptr, receive.into.data(), receive.into.size());
    }
    for (const Send& send : sends) {
        // The unit's own MFP: no socket, one copy, made when waited for.
        if (send.peer == rank_) self_copy_ = self_.take_send(send.data);
        else if (!lost_[send.peer]) post_slices(send.peer, send.data.data(), nullptr, send.data.size());
    }
}

unsigned Tcp_transport::slices_of(std::size_t bytes) const {
    return bytes >= std::size_t{mesh_.streams} * min_slice_bytes ? mesh_.streams : 1;
}

void Tcp_transport::post_slices(Rank peer, const std::byte* out, std::byte* in, std::size_t bytes) {
    const unsigned slices = slices_of(bytes);
    for (unsigned slice = 0; slice < slices; ++slice) {
        const std::size_t begin = part_start(bytes, slice, slices), end = part_start(bytes, slice + 1, slices);
        const Fd& connection = out != nullptr ? mesh_.to_stream(peer, slice) : mesh_.from_stream(peer, slice);
        posted_data_.push_back({connection.get(), peer, out != nullptr ? out + begin : nullptr,
                                in != nullptr ? in + begin : nullptr, end - begin, true});
    }
}

bool Tcp_transport::wait_data(std::span<const Rank> sent_to, std::span<const Rank> received_from) {
    if (stop_.requested()) return false;
    // Only the operations waited for move: the stream holds them in this
    // order. Each peer and direction has one, so any thread may take it.
    for (Shard& shard : shards_) shard.operations.clear();
    std::size_t waited = 0;
    std::erase_if(posted_data_, [&](const Operation& operation) {
        const std::span<const Rank> peers = operation.out ? sent_to : received_from;
        if (std::find(peers.begin(), peers.end(), operation.peer) == peers.end()) return false;
        shards_[waited++ % shards_.size()].operations.push_back(operation);
        return true;
    });
    const auto waits_for = [&](std::span<const Rank> peers) {
        return std::find(peers.begin(), peers.end(), rank_) != peers.end();
    };
    const bool copy = !self_copy_.from.empty() && (waits_for(sent_to) || waits_for(received_from));
    const Moving_time moving(traffic_);
    const bool done = drive_parts(static_cast<unsigned>(std::clamp<std::size_t>(waited, 1, shards_.size())), nullptr, copy);
    if (copy) self_copy_ = {};
    return done;
}

void Tcp_transport::quiesce() {
    posted_data_.clear();  // the kernel holds no pointer into the caller's memory
    self_copy_ = {};
    self_.cancel();
}

void Tcp_transport::copy_to_self(unsigned part, unsigned parts) const {
    const std::size_t bytes = self_copy_.from.size();
    const std::size_t begin = part_start(bytes, part, parts), end = part_start(bytes, part + 1, parts);
    if (end > begin) std::memcpy(self_copy_.into.data() + begin, self_copy_.from.data() + begin, end - begin);
}

void Tcp_transport::cut_off(Shard& shard, Rank peer, Link_failure failure, std::string detail) {
    if (cut_[peer].exchange(true, std::memory_order_relaxed)) return;  // another thread did
    for_each_connection(peer, [](const Fd& connection) {
        if (connection) ::shutdown(connection.get(), SHUT_RDWR);
    });
    shard.losses.push_back({peer, failure, std::move(detail)});
}

void Tcp_transport::lose_noted(Shard& shard) {
    for (Loss& loss : shard.losses) lose(loss.peer, loss.failure, loss.detail);
    shard.losses.clear();
}

void Tcp_transport::cut_off_if_silent(Shard& shard, Rank peer, Clock::time_point now) {
    if (peer == rank_ || cut(peer)) return;
    const bool heard = heartbeat_.heard_yet(peer);
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - heartbeat_.last_heard(peer));
    if (silent < (heard ? liveness_.peer_timeout : liveness_.first_sign_timeout)) return;
    cut_off(shard, peer, Link_failure::timeout,
         heard ? "no sign of life from its process for " + std::to_string(silent.count()) +
                     " ms (--peer-timeout-ms): it is stopped or hung, or the network from it is cut"
               : "no sign of life from its process in the " + std::to_string(silent.count()) +
                     " ms since it connected (--join-timeout-ms plus --peer-timeout-ms)");
}

void Tcp_transport::lose_silent(std::span<const Rank> peers) {
    const Clock::time_point now = Clock::now();
    for (const Rank peer : peers) cut_off_if_silent(shards_[0], peer, now);
    lose_noted(shards_[0]);
}

bool Tcp_transport::drive(Shard& shard, const Deadline* deadline) {
    std::vector<pollfd>& poll_set = shard.poll_set;
    while (true) {
        poll_set.clear();
        poll_set.push_back({stop_.fd(), POLLIN, 0});
        const Clock::time_point now = Clock::now();
        for (Operation& operation : shard.operations) {
            if (operation.left != 0) cut_off_if_silent(shard, operation.peer, now);
            if (operation.left != 0 && cut(operation.peer)) operation.left = 0;  // lost in this transfer
            if (operation.left != 0) progress(shard, operation, now);
            if (operation.left != 0)
                poll_set.push_back({operation.fd, static_cast<short>(operation.out ? POLLOUT : POLLIN), 0});
        }
        if (poll_set.size() == 1) return true;
        // Wake at the heartbeat's pace to look for silent peers.
        auto timeout = std::chrono::ceil<std::chrono::milliseconds>(heartbeat_.interval()).count();
        if (deadline) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline->at - Clock::now()).count();
            if (left <= 0) {
                for (Operation& operation : shard.operations)
                    if (operation.left != 0) cut_off(shard, operation.peer, deadline->failure, deadline->detail);
                continue;
            }
            timeout = std::min(timeout, left);
        }
        // Look again for a while before sleeping (Busy_poll); errors are the sleeping poll's to report.
        if (busy_poll_.poll([&] { return ::poll(poll_set.data(), poll_set.size(), 0) > 0; })) {
            if (poll_set[0].revents != 0) return false;
            continue;
        }
        const int timeout_ms = static_cast<int>(timeout);
        if (::poll(poll_set.data(), poll_set.size(), timeout_ms) < 0 && errno != EINTR)
            throw Transport_error("poll: " + error_text(errno));
        if (poll_set[0].revents != 0) return false;
    }
}

void Tcp_transport::progress(Shard& shard, Operation& operation, Clock::time_point now) {
    while (operation.left != 0) {
        const ssize_t moved = operation.out ? ::send(operation.fd, operation.out, operation.left, MSG_NOSIGNAL)
                                            : ::recv(operation.fd, operation.in, operation.left, 0);
        if (moved > 0) {
            // Bytes read show the peer's process at work however late its
            // beats (bytes sent might sit in a stopped process's buffers).
            if (operation.in != nullptr) heartbeat_.heard(operation.peer, now);
            if (operation.data && traffic_)
                (operation.out ? traffic_->bytes_sent : traffic_->bytes_received)
                    .fetch_add(static_cast<std::uint64_t>(moved), std::memory_order_relaxed);
            operation.left -= static_cast<std::size_t>(moved);
            if (operation.out) operation.out += moved;
            else operation.in += moved;
            continue;
        }
        if (moved < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (stop_.requested()) return;  // peers closing while everyone stops is no failure
        const int error = moved == 0 ? 0 : errno;
        const Link_failure failure = error == 0                                ? Link_failure::closed
                                     : error == ECONNRESET || error == EPIPE   ? Link_failure::reset
                                     : error == ETIMEDOUT                      ? Link_failure::timeout
                                                                               : Link_failure::error;
        operation.left = 0;
        cut_off(shard, operation.peer, failure,
             error == 0 ? "it closed its data connection"
                        : std::string(operation.out ? "sending: " : "receiving: ") + error_text(error));
        return;
    }
}

}  // namespace eb
