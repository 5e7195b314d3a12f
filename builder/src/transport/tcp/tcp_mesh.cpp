#include "transport/tcp/tcp_mesh.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "base/log.hpp"
#include "base/socket.hpp"
#include "transport/transport.hpp"
#include "formats/wire_format.hpp"

namespace eb {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto first_retry_delay = 50ms;
constexpr auto max_retry_delay = 1s;
// A dial that neither completes nor fails by then (say, a pod IP not routable
// yet) is abandoned and retried, re-resolving the name.
constexpr auto connect_timeout = 2s;
constexpr auto hello_timeout = 2s;
constexpr auto accept_pause = 100ms;  // between accepts while out of file descriptors
constexpr auto resolve_timeout = 5s;  // a name with no answer by then: the dial fails and is tried again
constexpr auto resolve_poll = 10ms;   // how often a name being resolved is looked at
constexpr auto report_interval = 3s;
constexpr std::size_t peers_listed_per_report = 4;

// First bytes on every data connection: who dials, in which mesh, and where
// it stands in the event stream.
constexpr std::uint32_t hello_magic = 0x4C484245;  // "EBHL"
// 4: a switch is followed by the reports and verdicts of table_switch.hpp.
// 7: cycle headers carry the sender's lost list, a proposal round follows
// them; heartbeats flow back. 8: the hello names its stream (--tcp-streams).
// 9: cycle headers announce the next cycle's MFP sizes (--verbs-depth).
constexpr std::uint16_t mesh_protocol_version = 9;
constexpr std::uint16_t hello_in_session = 1;
constexpr std::uint16_t hello_verbs = 2;
struct Hello {
    std::uint32_t magic;
    std::uint16_t version;
    std::uint16_t flags;  // hello_in_session, hello_verbs
    std::uint32_t rank;
    std::uint32_t units;
    std::uint32_t epoch;
    std::uint16_t stream;   // which of the streams to the acceptor this connection is
    std::uint16_t streams;  // --tcp-streams: connections per peer and direction
    std::uint64_t next_chunk;
    std::uint64_t cycles_done;
};
static_assert(sizeof(Hello) == 40);

// Whether the other end of a connected socket closed or reset it, without
// consuming anything.
bool peer_closed(int fd) {
    std::byte probe;
    const ssize_t got = ::recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// Sent on a dial just before closing it: from another epoch, so the dialler
// knows to dial again rather than take the close for a departure (followed
// by the refusing unit's epoch, 4 bytes: a dialler switching a running set
// stops dialling a joiner already on a later table, which never goes back);
// over another transport, so the dialler fails as the refusing unit does.
constexpr std::byte epoch_refusal{'R'};
constexpr std::byte transport_refusal{'T'};
// Sent on a dial from a unit with another --tcp-streams: both fail.
constexpr std::byte streams_refusal{'S'};
// Sent on a dial whose hello does not fit this unit's table (another number
// of ranks, a rank it does not expect): refused, and nobody's state changes.
constexpr std::byte table_refusal{'U'};
// Sent on a dial whose proof of the run's data key is wrong (another run, a
// stray process, a replayed hello): refused, and nobody's state changes.
constexpr std::byte key_refusal{'K'};
// Sent on a dial whose hello was taken: only then is the dial up, so a dial
// that reached a unit about to refuse it (another epoch) is never counted as
// a connection, to be found broken at the first send.
constexpr std::byte dial_accepted{'A'};

std::string transport_mismatch(Rank peer, bool peer_verbs, bool verbs) {
    return "rank " + std::to_string(peer) + " moves data over " + (peer_verbs ? "verbs" : "tcp") +
           ", this unit over " + (verbs ? "verbs" : "tcp") + ": every unit of a set needs the same --transport";
}

std::string streams_mismatch(Rank peer, unsigned peer_streams, unsigned streams) {
    return "rank " + std::to_string(peer) + " opens " + std::to_string(peer_streams) +
           " data connections per peer and direction, this unit " + std::to_string(streams) +
           ": every unit of a set needs the same --tcp-streams";
}

// A host name being resolved on a thread of its own; the thread keeps it
// alive for as long as it runs, even once the dial gave up on it.
struct Resolution {
    std::atomic<bool> done{false};
    Resolved result;
};

// One of this unit's connections to a peer's BU (one per stream).
struct Dial {
    std::shared_ptr<Resolution> resolution;  // set while its name is being resolved
    Clock::time_point resolve_give_up_at{};
    Fd fd;  // set from the start of a connect attempt
    bool connected = false;   // the peer's nonce is awaited
    Data_key::Nonce nonce{};
    std::size_t nonce_received = 0;
    bool hello_sent = false;  // hello and proof sent, acceptance awaited
    bool up = false;          // accepted
    Clock::time_point retry_at{};
    Clock::time_point give_up_at{};
    Clock::duration backoff = first_retry_delay;
    bool settled = false;  // up, and nothing more to watch for
    std::string last_failure = "not tried yet";
};

// An accepted connection, sent its nonce, whose hello and proof of the
// run's data key have not fully arrived.
struct Greeting {
    Fd fd;
    Data_key::Nonce nonce{};
    std::array<std::byte, sizeof(Hello) + Data_key::mac_bytes> hello{};
    std::size_t received = 0;
    Clock::time_point give_up_at;
};

// Dialling to a local port nobody listens on can, rarely, connect the socket
// to itself (TCP simultaneous open) when the kernel picks that very port as
// the source port. Such a socket would also hold the peer's port hostage.
bool connected_to_itself(int fd) {
    sockaddr_in local{}, remote{};
    socklen_t local_length = sizeof local, remote_length = sizeof remote;
    return ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) == 0 &&
           ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_length) == 0 &&
           local.sin_port == remote.sin_port && local.sin_addr.s_addr == remote.sin_addr.s_addr;
}

class Mesh_builder {
public:
    Mesh_builder(const Fd& listener, Rank rank, std::span<const Peer_address> peers, std::vector<bool> wanted,
                 const Mesh_position& position, int peer_timeout_ms, Clock::duration join_timeout,
                 const Stop_flag& stop, const Data_key& key, Resolver resolve, Refusal_counts* refused)
        : listener_(listener),
          rank_(rank),
          peers_(peers),
          wanted_(std::move(wanted)),
          position_(position),
          peer_timeout_ms_(peer_timeout_ms),
          join_timeout_(join_timeout),
          stop_(stop),
          key_(key),
          resolve_(std::move(resolve)),
          refused_(refused),
          streams_(position.streams),
          dials_(peers.size() * streams_),
          accepted_(peers.size() * streams_),
          hellos_(peers.size()),
          later_epochs_(peers.size()) {
        if (streams_ == 0 || streams_ > max_tcp_streams)
            throw std::logic_error("connect_peers: " + std::to_string(streams_) + " streams, not 1.." +
                                   std::to_string(max_tcp_streams));
        wanted_[rank] = false;
        if (position.in_session) join_deadline_ = started_ + join_timeout_;
    }

    std::optional<Mesh_connections> run();

private:
    Rank units() const { return static_cast<Rank>(peers_.size()); }
    // Dials and accepted connections are indexed by slot: peer * streams + stream.
    std::size_t slots() const { return dials_.size(); }
    Rank peer_of(std::size_t slot) const { return static_cast<Rank>(slot / streams_); }
    bool dialled(Rank peer) const;     // every stream to it up
    bool dialled_in(Rank peer) const;  // every stream from it accepted
    std::size_t dials_up() const;      // peers dialled
    std::size_t accepted() const;      // peers dialled in
    std::size_t live_peers() const {
        return static_cast<std::size_t>(std::count(wanted_.begin(), wanted_.end(), true));
    }
    bool wanted(Rank peer) const { return wanted_[peer]; }
    bool complete() const { return dials_up() == live_peers() && accepted() == live_peers(); }

    void start_due_dials(Clock::time_point now);
    void start_dial(std::size_t slot, Clock::time_point now);
    void finish_dial(std::size_t slot, Clock::time_point now);
    void take_nonce(std::size_t slot, Clock::time_point now);
    void take_answer(std::size_t slot, Clock::time_point now);
    void fail_dial(std::size_t slot, std::string why, Clock::time_point now);
    void refused_for_epoch(std::size_t slot, Clock::time_point now);
    void pass_over(Rank peer, std::uint32_t its_epoch);
    void give_up_overdue(Clock::time_point now);
    void accept_waiting(Clock::time_point now);
    void read_hello(Greeting& greeting);
    void count(Refusal refusal) {
        if (refused_ != nullptr) refused_->add(refusal);
    }
    // Counts a refusal and logs why, for the first few only: a storm of
    // stray dials must not flood the log (all are in data_refusals).
    template <typename... Why>
    void refuse(Refusal refusal, const Why&... why) {
        count(refusal);
        if (++refusals_ <= refusals_logged)
            log_warning(why..., refusals_ == refusals_logged ? " (further refusals are only counted: data_refusals "
                                                               "in /status)"
                                                             : "");
    }
    static constexpr int refusals_logged = 5;
    Clock::time_point next_deadline() const;
    void report() const;

    const Fd& listener_;
    Rank rank_;
    std::span<const Peer_address> peers_;
    std::vector<bool> wanted_;
    Mesh_position position_;
    int peer_timeout_ms_;
    Clock::duration join_timeout_;
    const Stop_flag& stop_;
    const Data_key& key_;
    Resolver resolve_;
    Refusal_counts* refused_;  // may be null
    unsigned streams_;          // per peer and direction
    std::vector<Dial> dials_;   // by slot
    std::vector<Fd> accepted_;  // by slot
    std::vector<std::optional<Mesh_position>> hellos_;  // by rank
    std::vector<std::uint32_t> later_epochs_;  // by rank: a joiner passed over (pass_over), else 0
    std::vector<Greeting> greetings_;
    Clock::time_point started_ = Clock::now();
    Clock::time_point next_report_ = started_ + report_interval;
    // Out of file descriptors: the listener stays readable, so it is left
    // alone until then instead of being polled (and failing) in a spin.
    Clock::time_point accept_again_at_{};
    Clock::time_point descriptor_warning_at_{};
    int refusals_ = 0;  // by this connect phase
    // Set once the connect joins a running set: then it ends by this time.
    std::optional<Clock::time_point> join_deadline_;
};

std::optional<Mesh_connections> Mesh_builder::run() {
    std::vector<pollfd> watch;
    std::vector<std::size_t> watched_dials;  // slots
    while (!complete()) {
        const auto now = Clock::now();
        if (join_deadline_ && now >= *join_deadline_) {
            log_warning("join timeout: giving up on the peers not connected yet");
            report();
            break;
        }
        start_due_dials(now);
        give_up_overdue(now);
        if (now >= next_report_) {
            report();
            next_report_ = now + report_interval;
        }

        watch.assign({{stop_.fd(), POLLIN, 0},
                      {listener_.get(), static_cast<short>(now >= accept_again_at_ ? POLLIN : 0), 0}});
        watched_dials.clear();
        // Dials in progress wait for POLLOUT, then for the peer's answer to
        // the hello; accepted ones are watched for a peer that went away.
        for (std::size_t slot = 0; slot < slots(); ++slot) {
            const Dial& dial = dials_[slot];
            if (dial.fd && !(dial.up && dial.settled)) {
                watch.push_back({dial.fd.get(), static_cast<short>(dial.connected ? POLLIN : POLLOUT), 0});
                watched_dials.push_back(slot);
            }
        }
        for (const Greeting& greeting : greetings_) watch.push_back({greeting.fd.get(), POLLIN, 0});

        const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline() - now);
        if (::poll(watch.data(), watch.size(), static_cast<int>(std::clamp<long>(wait.count(), 0, 1000))) < 0 &&
            errno != EINTR)
            throw Transport_error("poll: " + error_text(errno));
        if (watch[0].revents != 0) return std::nullopt;

        const auto woke = Clock::now();
        for (std::size_t i = 0; i < watched_dials.size(); ++i) {
            if (watch[2 + i].revents == 0) continue;
            Dial& dial = dials_[watched_dials[i]];
            if (!dial.connected) {
                finish_dial(watched_dials[i], woke);
            } else if (!dial.hello_sent) {
                take_nonce(watched_dials[i], woke);
            } else if (!dial.up) {
                take_answer(watched_dials[i], woke);
            } else {
                dial.settled = true;  // closed: the peer went away; the transport will find it lost
            }
        }
        for (std::size_t i = 0; i < greetings_.size(); ++i)
            if (watch[2 + watched_dials.size() + i].revents != 0) read_hello(greetings_[i]);
        std::erase_if(greetings_, [](const Greeting& greeting) { return !greeting.fd; });
        if (watch[1].revents != 0) accept_waiting(woke);
    }

    // Dials still owing their hello are no peer of this table: refused, so
    // none goes uncounted.
    if (!greetings_.empty()) {
        log_warning("closed ", greetings_.size(), " data connections that had sent no whole hello when this unit ",
                    "finished connecting");
        for (std::size_t i = 0; i < greetings_.size(); ++i) count(Refusal::slow);
        greetings_.clear();
    }
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_);
    Mesh_connections connections{Tcp_mesh::empty(units(), streams_), {}, {}};
    std::size_t connected = 0;
    for (Rank peer = 0; peer < units(); ++peer) {
        // A peer reached one way only, or on some of its streams, is none:
        // its connections close here.
        if (!dialled(peer) || !dialled_in(peer)) continue;
        ++connected;
        for (unsigned stream = 0; stream < streams_; ++stream) {
            const std::size_t slot = std::size_t{peer} * streams_ + stream;
            connections.mesh.to_stream(peer, stream) = std::move(dials_[slot].fd);
            connections.mesh.from_stream(peer, stream) = std::move(accepted_[slot]);
        }
    }
    log_info("data mesh up: connected to ", connected, " of ", live_peers(), " peers in ", took.count(), " ms");
    connections.hellos = std::move(hellos_);
    connections.later_epochs = std::move(later_epochs_);
    return connections;
}

bool Mesh_builder::dialled(Rank peer) const {
    const auto first = dials_.begin() + static_cast<std::ptrdiff_t>(std::size_t{peer} * streams_);
    return std::all_of(first, first + streams_, [](const Dial& dial) { return dial.up; });
}

bool Mesh_builder::dialled_in(Rank peer) const {
    const auto first = accepted_.begin() + static_cast<std::ptrdiff_t>(std::size_t{peer} * streams_);
    return std::all_of(first, first + streams_, [](const Fd& fd) { return bool(fd); });
}

std::size_t Mesh_builder::dials_up() const {
    std::size_t peers = 0;
    for (Rank peer = 0; peer < units(); ++peer) peers += dialled(peer) ? 1 : 0;
    return peers;
}

std::size_t Mesh_builder::accepted() const {
    std::size_t peers = 0;
    for (Rank peer = 0; peer < units(); ++peer) peers += dialled_in(peer) ? 1 : 0;
    return peers;
}

void Mesh_builder::start_due_dials(Clock::time_point now) {
    for (std::size_t slot = 0; slot < slots(); ++slot)
        if (wanted(peer_of(slot)) && !dials_[slot].fd && now >= dials_[slot].retry_at) start_dial(slot, now);
}

void Mesh_builder::start_dial(std::size_t slot, Clock::time_point now) {
    const Peer_address& address = peers_[peer_of(slot)];
    Dial& dial = dials_[slot];
    in_addr ip{};
    if (::inet_pton(AF_INET, address.host.c_str(), &ip) != 1) {  // a name: resolved off this thread
        if (!dial.resolution) {
            dial.resolution = std::make_shared<Resolution>();
            dial.resolve_give_up_at = now + resolve_timeout;
            std::thread([resolution = dial.resolution, resolve = resolve_, host = address.host] {
                resolution->result = resolve(host);
                resolution->done.store(true, std::memory_order_release);
            }).detach();
            return;
        }
        if (!dial.resolution->done.load(std::memory_order_acquire)) {
            if (now < dial.resolve_give_up_at) return;  // looked at again on the next turn
            dial.resolution.reset();
            return fail_dial(slot, "cannot resolve: no answer within " +
                                       std::to_string(std::chrono::duration_cast<std::chrono::seconds>(resolve_timeout).count()) +
                                       " s (is DNS reachable?)",
                             now);
        }
        const Resolved resolved = std::move(dial.resolution->result);
        dial.resolution.reset();
        if (const auto* error = std::get_if<std::string>(&resolved)) return fail_dial(slot, "cannot resolve: " + *error, now);
        ip = std::get<in_addr>(resolved);
    }
    sockaddr_in target{};
    target.sin_family = AF_INET;
    target.sin_port = htons(address.port);
    target.sin_addr = ip;

    // Out of descriptors, say: no exception, the dial is tried again later.
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return fail_dial(slot, "socket: " + error_text(errno), now);
    tune_data_socket(fd.get(), peer_timeout_ms_);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0 && errno != EINPROGRESS)
        return fail_dial(slot, error_text(errno), now);
    // Completion, immediate or not, is seen as POLLOUT in the main loop.
    dial.fd = std::move(fd);
    dial.give_up_at = now + connect_timeout;
}

void Mesh_builder::finish_dial(std::size_t slot, Clock::time_point now) {
    Dial& dial = dials_[slot];
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(dial.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
    if (error != 0) return fail_dial(slot, error_text(error), now);
    if (connected_to_itself(dial.fd.get())) return fail_dial(slot, "connected to itself, nobody listens yet", now);
    dial.connected = true;  // the peer's nonce comes first
    dial.give_up_at = now + hello_timeout;
}

void Mesh_builder::take_nonce(std::size_t slot, Clock::time_point now) {
    Dial& dial = dials_[slot];
    const ssize_t got = ::recv(dial.fd.get(), dial.nonce.data() + dial.nonce_received,
                               dial.nonce.size() - dial.nonce_received, 0);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got <= 0) return fail_dial(slot, "it closed the connection before sending its nonce; dialling again", now);
    dial.nonce_received += static_cast<std::size_t>(got);
    if (dial.nonce_received < dial.nonce.size()) return;

    const Hello hello{hello_magic,         mesh_protocol_version,
                      static_cast<std::uint16_t>((position_.in_session ? hello_in_session : 0) |
                                                 (position_.verbs ? hello_verbs : 0)),
                      rank_,               units(),
                      position_.epoch,     static_cast<std::uint16_t>(slot % streams_),
                      static_cast<std::uint16_t>(streams_),
                      position_.next_chunk, position_.cycles_done};
    std::array<std::byte, sizeof(Hello) + Data_key::mac_bytes> message{};
    std::memcpy(message.data(), &hello, sizeof hello);
    const Data_key::Mac proof = key_.prove(dial.nonce, std::span(message).first(sizeof hello));
    std::memcpy(message.data() + sizeof hello, proof.data(), proof.size());
    // A fresh connection's send buffer is empty: the hello goes out whole or
    // the connection is broken.
    if (::send(dial.fd.get(), message.data(), message.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(message.size()))
        return fail_dial(slot, "could not send the hello", now);
    dial.hello_sent = true;
    dial.give_up_at = now + hello_timeout;
}

void Mesh_builder::take_answer(std::size_t slot, Clock::time_point now) {
    Dial& dial = dials_[slot];
    std::byte answer{};
    const ssize_t got = ::recv(dial.fd.get(), &answer, 1, 0);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got == 1 && answer == dial_accepted) {
        dial.up = true;
        return;
    }
    if (got == 1 && answer == transport_refusal)
        throw Transport_error(transport_mismatch(peer_of(slot), !position_.verbs, position_.verbs));
    if (got == 1 && answer == epoch_refusal) return refused_for_epoch(slot, now);
    if (got == 1 && answer == streams_refusal)
        throw Transport_error("rank " + std::to_string(peer_of(slot)) + " refused this unit's " +
                              std::to_string(streams_) +
                              " data connections per peer and direction: every unit of a set needs the same "
                              "--tcp-streams");
    fail_dial(slot,
              got == 1 && answer == key_refusal
                  ? "it refused this unit's proof of the run's data key (the units hold different keys: "
                    "--data-key-file or EB_DATA_KEY); dialling again"
              : got == 1 && answer == table_refusal
                  ? "it refused this unit's hello: its table has another number of ranks or does not expect this "
                    "rank (every unit needs the same --peers and --dummies); dialling again"
                  : "it closed the connection before taking the hello; dialling again",
              now);
}

void Mesh_builder::refused_for_epoch(std::size_t slot, Clock::time_point now) {
    Dial& dial = dials_[slot];
    // Sent with the refusal byte, before the close: here already, or the
    // peer's release does not send it.
    std::uint32_t its_epoch = 0;
    if (::recv(dial.fd.get(), &its_epoch, sizeof its_epoch, MSG_DONTWAIT) != sizeof its_epoch) its_epoch = 0;
    // Epochs only go forward: a joiner on a later table never takes this
    // one, so waiting out the join timeout for it would only stall the set.
    if (position_.in_session && its_epoch > position_.epoch) return pass_over(peer_of(slot), its_epoch);
    fail_dial(slot,
              its_epoch == 0 ? std::string("it is on another rank table epoch; dialling again")
                             : "it is on rank table epoch " + std::to_string(its_epoch) + ", this unit on " +
                                   std::to_string(position_.epoch) + "; dialling again",
              now);
}

void Mesh_builder::pass_over(Rank peer, std::uint32_t its_epoch) {
    log_info("rank ", peer, " is on rank table epoch ", its_epoch, ", later than this switch's ", position_.epoch,
             ": it cannot join under this table; not waiting for it (the set takes it in at the switch to its table)");
    wanted_[peer] = false;
    later_epochs_[peer] = its_epoch;
    hellos_[peer].reset();
    for (unsigned stream = 0; stream < streams_; ++stream) {
        const std::size_t slot = std::size_t{peer} * streams_ + stream;
        dials_[slot] = Dial{};
        dials_[slot].last_failure = "on a later rank table epoch";
        accepted_[slot].reset();
    }
}

void Mesh_builder::fail_dial(std::size_t slot, std::string why, Clock::time_point now) {
    Dial& dial = dials_[slot];
    dial.fd.reset();
    dial.connected = false;
    dial.nonce_received = 0;
    dial.hello_sent = false;
    dial.up = false;
    dial.settled = false;
    dial.last_failure = std::move(why);
    dial.retry_at = now + dial.backoff;
    dial.backoff = std::min<Clock::duration>(dial.backoff * 2, max_retry_delay);
}

void Mesh_builder::give_up_overdue(Clock::time_point now) {
    for (std::size_t slot = 0; slot < slots(); ++slot) {
        const Dial& dial = dials_[slot];
        if (dial.fd && !dial.up && now >= dial.give_up_at)
            fail_dial(slot, dial.hello_sent ? "no answer to the hello" : "no answer to connect", now);
    }
    std::erase_if(greetings_, [&](const Greeting& greeting) {
        if (now < greeting.give_up_at) return false;
        count(Refusal::slow);
        return true;
    });
}

void Mesh_builder::accept_waiting(Clock::time_point now) {
    while (true) {
        Fd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd && (errno == EMFILE || errno == ENFILE)) {
            accept_again_at_ = now + accept_pause;
            if (now >= descriptor_warning_at_) {
                log_warning("cannot accept data connections: out of file descriptors (", error_text(errno),
                            "); raise the open-files limit (ulimit -n) or run fewer units per process");
                descriptor_warning_at_ = now + report_interval;
            }
            return;
        }
        if (!fd) return;  // EAGAIN: none left; other errors concern only that dialler, who retries
        tune_data_socket(fd.get(), peer_timeout_ms_);
        // A fresh nonce per connection: a proof recorded on another is worthless here.
        Greeting greeting{std::move(fd), Data_key::fresh_nonce(), {}, 0, now + hello_timeout};
        if (::send(greeting.fd.get(), greeting.nonce.data(), greeting.nonce.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(greeting.nonce.size()))
            continue;  // gone already
        greetings_.push_back(std::move(greeting));
    }
}

void Mesh_builder::read_hello(Greeting& greeting) {
    const ssize_t got = ::recv(greeting.fd.get(), greeting.hello.data() + greeting.received,
                               greeting.hello.size() - greeting.received, 0);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got <= 0) {
        greeting.fd.reset();  // the dialler gave up; it will dial again
        return;
    }
    greeting.received += static_cast<std::size_t>(got);
    if (greeting.received < greeting.hello.size()) return;

    const auto hello = load<Hello>(greeting.hello, 0);
    if (hello.magic != hello_magic || hello.version != mesh_protocol_version) {
        refuse(Refusal::protocol, "dropped a data connection that did not open with an eb-builder hello of version ",
               mesh_protocol_version,
               hello.magic == hello_magic
                   ? " (it sent version " + std::to_string(hello.version) + ": run one eb-builder release in a set)"
                   : std::string(" (not an eb-builder hello)"));
        greeting.fd.reset();
        return;
    }
    if (hello.stream >= hello.streams) {
        refuse(Refusal::protocol, "dropped a data connection whose hello names stream ", hello.stream, " of ",
               hello.streams, ": no eb-builder sends that (streams are 0..--tcp-streams - 1)");
        greeting.fd.reset();
        return;
    }
    Data_key::Mac proof{};
    std::memcpy(proof.data(), greeting.hello.data() + sizeof(Hello), proof.size());
    if (!key_.verify(greeting.nonce, std::span(greeting.hello).first(sizeof(Hello)), proof)) {
        refuse(Refusal::key, "refused a dial claiming rank ", hello.rank, ": its proof of the run's data key is wrong (",
               key_.configured() ? "another key, none, or a replayed hello" : "this unit has no key, it has one",
               "); every unit of a run needs the same --data-key-file or EB_DATA_KEY");
        (void)::send(greeting.fd.get(), &key_refusal, 1, MSG_NOSIGNAL);
        greeting.fd.reset();
        return;
    }
    if (hello.epoch != position_.epoch) {
        // A unit on another rank table (switching before or after this one):
        // it dials again until both agree.
        refuse(Refusal::epoch, "dropped a dial from rank ", hello.rank, " at rank table epoch ", hello.epoch,
               "; this unit is at epoch ", position_.epoch);
        std::array<std::byte, 1 + sizeof position_.epoch> refusal{epoch_refusal};
        std::memcpy(refusal.data() + 1, &position_.epoch, sizeof position_.epoch);
        (void)::send(greeting.fd.get(), refusal.data(), refusal.size(), MSG_NOSIGNAL);
        greeting.fd.reset();
        return;
    }
    if (hello.units != units() || hello.rank >= units() || !wanted(hello.rank)) {
        // A stray or misconfigured process: refused, never a reason to fail.
        refuse(Refusal::table, "refused a dial from a process claiming rank ", hello.rank, " of ", hello.units,
               " units: this is rank ", rank_, " of ", units(),
               (hello.units == units() && hello.rank < units() ? ", which does not expect that rank now" : ""),
               "; every unit needs the same --peers and --dummies lists and its own --rank");
        (void)::send(greeting.fd.get(), &table_refusal, 1, MSG_NOSIGNAL);
        greeting.fd.reset();
        return;
    }
    if (hello.streams != streams_) {
        (void)::send(greeting.fd.get(), &streams_refusal, 1, MSG_NOSIGNAL);
        throw Transport_error(streams_mismatch(hello.rank, hello.streams, streams_));
    }
    const std::size_t slot = std::size_t{hello.rank} * streams_ + hello.stream;
    if (accepted_[slot]) {
        log_warning("rank ", hello.rank, " dialled in again; using the new connection");
        // A peer that restarted: our dial reached the old process, which the
        // new one never hears from. The old one's end is closed (nothing is
        // sent on a dial while connecting), so dial the new one now. A live
        // peer that merely redialled keeps our dial, else the two would
        // redial each other in turn.
        Dial& dial = dials_[slot];
        if (dial.up && peer_closed(dial.fd.get())) {
            log_warning("rank ", hello.rank, " closed our earlier connection: it restarted; dialling it again");
            dial.fd.reset();
            dial.connected = false;
            dial.nonce_received = 0;
            dial.hello_sent = false;
            dial.up = false;
            dial.settled = false;
            dial.retry_at = Clock::now();
            dial.backoff = first_retry_delay;
            dial.last_failure = "restarted; dialling it again";
        }
    }
    const bool verbs = (hello.flags & hello_verbs) != 0;
    if (verbs != position_.verbs) {
        (void)::send(greeting.fd.get(), &transport_refusal, 1, MSG_NOSIGNAL);
        throw Transport_error(transport_mismatch(hello.rank, verbs, position_.verbs));
    }
    if (::send(greeting.fd.get(), &dial_accepted, 1, MSG_NOSIGNAL) != 1) {
        greeting.fd.reset();  // gone meanwhile: it dials again
        return;
    }
    accepted_[slot] = std::move(greeting.fd);
    hellos_[hello.rank] = Mesh_position{hello.epoch, (hello.flags & hello_in_session) != 0, hello.next_chunk,
                                        hello.cycles_done, verbs};
    if (hellos_[hello.rank]->in_session && !join_deadline_) {
        join_deadline_ = Clock::now() + join_timeout_;
        log_info("rank ", hello.rank, " dialled in from a running set: joining it; peers not connected within ",
                 std::chrono::duration_cast<std::chrono::milliseconds>(join_timeout_).count(),
                 " ms are given up on");
    }
}

Clock::time_point Mesh_builder::next_deadline() const {
    Clock::time_point next = join_deadline_ ? std::min(next_report_, *join_deadline_) : next_report_;
    if (accept_again_at_ > Clock::now()) next = std::min(next, accept_again_at_);
    for (const Dial& dial : dials_)
        if (dial.resolution) next = std::min(next, Clock::now() + resolve_poll);
    for (std::size_t slot = 0; slot < slots(); ++slot) {
        const Dial& dial = dials_[slot];
        if (!wanted(peer_of(slot)) || dial.up) continue;
        next = std::min(next, dial.fd ? dial.give_up_at : dial.retry_at);
    }
    for (const Greeting& greeting : greetings_) next = std::min(next, greeting.give_up_at);
    return next;
}

void Mesh_builder::report() const {
    std::ostringstream line;
    line << "connecting: dialled " << dials_up() << "/" << live_peers() << " peers, " << accepted() << "/"
         << live_peers() << " dialled in";
    std::size_t listed = 0, unlisted = 0;
    for (Rank peer = 0; peer < units(); ++peer) {
        if (!wanted(peer) || (dialled(peer) && dialled_in(peer))) continue;
        if (listed == peers_listed_per_report) {
            ++unlisted;
            continue;
        }
        ++listed;
        // The first of its streams not up says why.
        const auto first = std::size_t{peer} * streams_;
        const auto down = std::find_if(dials_.begin() + static_cast<std::ptrdiff_t>(first),
                                       dials_.begin() + static_cast<std::ptrdiff_t>(first + streams_),
                                       [](const Dial& dial) { return !dial.up; });
        line << "; rank " << peer << " at " << peers_[peer].host << ":" << peers_[peer].port << ": "
             << (down == dials_.begin() + static_cast<std::ptrdiff_t>(first + streams_) ? "connected" : down->last_failure)
             << (dialled_in(peer) ? "" : ", not dialled in yet");
    }
    if (unlisted != 0) line << "; and " << unlisted << " more";
    log_info(line.str());
}

}  // namespace

Fd listen_for_peers(std::uint16_t port) {
    Fd listener = tcp_socket();
    tune_data_socket(listener.get());  // accepted sockets inherit the buffer sizes
    bind_and_listen(listener.get(), port, "this unit's --peers entry");
    return listener;
}

std::optional<Mesh_connections> connect_peers(const Fd& listener, Rank rank, std::span<const Peer_address> peers,
                                              std::vector<bool> wanted, const Mesh_position& position,
                                              int peer_timeout_ms, std::chrono::milliseconds join_timeout,
                                              const Stop_flag& stop, const Data_key& key, Resolver resolve,
                                              Refusal_counts* refused) {
    return Mesh_builder(listener, rank, peers, std::move(wanted), position, peer_timeout_ms, join_timeout, stop, key,
                        std::move(resolve), refused)
        .run();
}

Resolved resolve_host(const std::string& host) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int resolved = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); resolved != 0)
        return std::string(::gai_strerror(resolved));
    const in_addr address = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
    ::freeaddrinfo(found);
    return address;
}

std::optional<Tcp_mesh> connect_mesh(Fd listener, Rank rank, std::span<const Peer_address> peers,
                                     std::vector<bool> live, const Stop_flag& stop, unsigned streams) {
    if (live.empty()) live.assign(peers.size(), true);
    Mesh_position position;
    position.streams = streams;
    auto connections = connect_peers(listener, rank, peers, std::move(live), position, default_peer_timeout_ms,
                                     default_join_timeout, stop);
    if (!connections) return std::nullopt;
    return std::move(connections->mesh);
}

}  // namespace eb
