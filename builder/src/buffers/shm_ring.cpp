#include "buffers/shm_ring.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>
#include <utility>

#include "base/fd.hpp"
#include "base/log.hpp"
#include "base/socket.hpp"
#include "formats/wire_format.hpp"

namespace eb {

inline constexpr std::uint64_t ring_magic = 0x474E495242452D45;  // "E-EBRING"
inline constexpr std::uint32_t ring_version = 1;
inline constexpr std::size_t control_bytes = 4096;  // data starts on the next page
inline constexpr std::uint64_t record_alignment = 64;  // a cache line: the two sides never share one
enum : std::uint64_t { record_element = 1, record_wrap = 2 };

struct Ring_control {
    std::atomic<std::uint64_t> magic;  // stored last by the creator, with release
    std::uint32_t version;
    std::uint32_t reserved;
    std::uint64_t capacity;  // data bytes, a multiple of record_alignment
    std::atomic<std::int32_t> writer_pid;
    std::atomic<std::int32_t> reader_pid;  // 0: none attached
    std::atomic<std::uint32_t> closed;     // a Ring_end: how the writer left
    alignas(64) std::atomic<std::uint64_t> head;  // bytes published, ever
    alignas(64) std::atomic<std::uint64_t> tail;  // bytes released, ever
    // As an MFP ring: the first event the reader skips to, when it joins a
    // running set (0: none asked). A writer that can seek (a readout
    // emulator) need not make the MFPs before it.
    alignas(64) std::atomic<std::uint64_t> wanted_event;
};
static_assert(sizeof(Ring_control) <= control_bytes);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::int32_t>::is_always_lock_free,
              "ring atomics must be lock-free to work across processes");

namespace {

struct Record_header {
    std::uint64_t size;
    std::uint64_t kind;
};

std::uint64_t record_bytes(std::uint64_t size) {
    return (sizeof(Record_header) + size + record_alignment - 1) & ~(record_alignment - 1);
}

bool alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

// Polls `ready`: a short spin, then pauses growing from 10 us to 1 ms, so a
// busy ring answers fast and an idle one costs little CPU. Checks the stop
// flag and `check_peer` (which throws if the other side is gone) on the way.
// With a deadline, returns false once it passed (true: ready).
template <class Ready, class Check>
bool wait_until(const Stop_flag& stop, Ready ready, Check check_peer,
                std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt) {
    auto pause = std::chrono::microseconds(10);
    for (std::uint64_t round = 0; !ready(); ++round) {
        if (round < 64) continue;
        if (stop.requested()) throw Stopped();
        if (round % 16 == 0) check_peer();
        if (deadline && std::chrono::steady_clock::now() >= *deadline) return false;
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    return true;
}

Ring_mapping map_segment(int fd, std::size_t bytes, const std::string& name) {
    void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) throw Ring_error("mmap " + name + ": " + error_text(errno));
    return Ring_mapping(base, bytes);
}

}  // namespace

const char* ring_end_name(Ring_end end) {
    switch (end) {
        case Ring_end::open: return "open";
        case Ring_end::complete: return "complete";
        case Ring_end::stopped: return "stopped";
        case Ring_end::failed: return "failed";
    }
    return "unknown";
}

std::string ring_name(const std::string& run, std::uint32_t rank, const char* what) {
    return "/eb-" + run + "-" + std::to_string(rank) + "-" + what;
}

Ring_mapping::Ring_mapping(Ring_mapping&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

Ring_mapping& Ring_mapping::operator=(Ring_mapping&& other) noexcept {
    std::swap(base_, other.base_);
    std::swap(bytes_, other.bytes_);
    return *this;
}

Ring_mapping::~Ring_mapping() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
}

std::byte* Ring_mapping::data() const { return static_cast<std::byte*>(base_) + control_bytes; }

Shm_ring_writer::Shm_ring_writer(std::string name, std::size_t capacity, const Stop_flag& stop)
    : name_(std::move(name)), capacity_((capacity + 4095) & ~std::uint64_t{4095}), stop_(stop) {
    const std::size_t bytes = control_bytes + capacity_;
    Fd fd(::shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd && errno == EEXIST) {
        // Left by an earlier writer: reclaim it unless that writer still runs.
        Fd old(::shm_open(name_.c_str(), O_RDWR | O_CLOEXEC, 0600));
        struct stat info {};
        pid_t owner = 0;
        if (old && ::fstat(old.get(), &info) == 0 && static_cast<std::size_t>(info.st_size) >= control_bytes) {
            const Ring_mapping stale = map_segment(old.get(), control_bytes, name_);
            owner = stale.control().writer_pid.load(std::memory_order_acquire);
        }
        if (alive(owner) && owner != ::getpid())
            throw Ring_error("shared-memory ring " + name_ + " is in use by writer pid " + std::to_string(owner) +
                             "; is another unit running with the same --run and --rank?");
        log_warning("reclaiming stale shared-memory ring ", name_, " left by pid ", owner);
        ::shm_unlink(name_.c_str());
        fd = Fd(::shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    }
    if (!fd) throw Ring_error("shm_open " + name_ + ": " + error_text(errno));
    // Reserve the pages now: a full /dev/shm fails here, not as SIGBUS later.
    // With signals held back meanwhile: on Linux 6.1 (and RHEL 9's 5.14)
    // any signal (a stop as the driver starts) fails tmpfs's reservation
    // with EINTR and frees what it had reserved, so retrying could go on
    // for ever under a stream of signals; held, they are handled once the
    // pages are there.
    sigset_t all{};
    sigset_t before{};
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, &before);
    const int error = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    if (error != 0) {
        ::shm_unlink(name_.c_str());
        throw Ring_error("cannot reserve " + std::to_string(bytes >> 20) + " MiB for " + name_ + " in /dev/shm: " +
                         error_text(error) + "; lower --ring-mib or give the pod more /dev/shm");
    }
    try {
        map_ = map_segment(fd.get(), bytes, name_);
    } catch (...) {
        ::shm_unlink(name_.c_str());  // the destructor will not run to do it
        throw;
    }
    Ring_control& control = *new (&map_.control()) Ring_control{};
    control.version = ring_version;
    control.capacity = capacity_;
    control.writer_pid.store(::getpid());
    control.magic.store(ring_magic, std::memory_order_release);
    regions_.assign({map_.bytes()});
}

Shm_ring_writer::~Shm_ring_writer() {
    // Unwinding on an error (or any end without finish()/stop()) must not
    // look like a clean finish to the reader.
    close(Ring_end::failed);
    // A reader already attached keeps its mapping and drains what is left.
    ::shm_unlink(name_.c_str());
}

std::size_t Shm_ring_writer::max_element() const { return capacity_ / 2 - sizeof(Record_header); }

void Shm_ring_writer::check_reader() {
    // A reader that died leaves its slot to the next one; keep waiting for it.
    Ring_control& control = map_.control();
    const pid_t reader = control.reader_pid.load();
    if (reader != 0 && !alive(reader)) {
        pid_t expected = reader;
        if (control.reader_pid.compare_exchange_strong(expected, 0))
            log_warning("reader pid ", reader, " of ring ", name_, " died; waiting for a new reader");
    }
}

void Shm_ring_writer::drain() {
    const Ring_control& control = map_.control();
    if (control.tail.load(std::memory_order_acquire) != reserved_)
        log_info("waiting for the reader of ", name_, " to take the last elements");
    wait_until(stop_, [&] { return control.tail.load(std::memory_order_acquire) == reserved_; },
               [&] { check_reader(); });
}

void Shm_ring_writer::close(Ring_end end) {
    if (end_ != Ring_end::open) return;  // the first verdict stands
    end_ = end;
    map_.control().closed.store(static_cast<std::uint32_t>(end), std::memory_order_release);
}

void Shm_ring_writer::finish() {
    drain();
    close(Ring_end::complete);
}

void Shm_ring_writer::stop() { close(Ring_end::stopped); }

void Shm_ring_writer::fail() { close(Ring_end::failed); }

std::span<std::byte> Shm_ring_writer::allocate(std::size_t bytes) { return reserve(bytes, std::nullopt); }

std::span<std::byte> Shm_ring_writer::allocate_within(std::size_t bytes, std::chrono::milliseconds patience) {
    return reserve(bytes, std::chrono::steady_clock::now() + patience);
}

std::span<std::byte> Shm_ring_writer::reserve(std::size_t bytes,
                                              std::optional<std::chrono::steady_clock::time_point> deadline) {
    if (bytes > max_element())
        throw Ring_error("an element of " + std::to_string(bytes) + " bytes does not fit the ring " + name_ +
                         " (at most " + std::to_string(max_element()) + "); raise --ring-mib");
    Ring_control& control = map_.control();
    const std::uint64_t need = record_bytes(bytes);
    const std::uint64_t offset = reserved_ % capacity_;
    const std::uint64_t skip = offset + need > capacity_ ? capacity_ - offset : 0;  // wrap to the start
    if (!wait_until(
            stop_,
            [&] { return reserved_ + skip + need - control.tail.load(std::memory_order_acquire) <= capacity_; },
            [&] { check_reader(); }, deadline))
        return {};
    if (skip != 0) {
        const Record_header wrap{0, record_wrap};
        std::memcpy(map_.data() + offset, &wrap, sizeof wrap);
    }
    const std::uint64_t start = reserved_ + skip;
    const Record_header element{bytes, record_element};
    std::memcpy(map_.data() + start % capacity_, &element, sizeof element);
    reserved_ = start + need;
    pending_.push_back(reserved_);
    return {map_.data() + start % capacity_ + sizeof(Record_header), bytes};
}

void Shm_ring_writer::commit() {
    if (pending_.empty()) throw std::logic_error("Shm_ring_writer: commit without allocate");
    map_.control().head.store(pending_.front(), std::memory_order_release);
    pending_.pop_front();
}

double Shm_ring_writer::fill() const {
    const std::uint64_t tail = map_.control().tail.load(std::memory_order_relaxed);
    return static_cast<double>(reserved_ - tail) / static_cast<double>(capacity_);
}

double Shm_ring_reader::fill() const {
    if (!map_) return 0;
    const Ring_control& control = map_.control();
    return static_cast<double>(control.head.load(std::memory_order_relaxed) - control.tail.load(std::memory_order_relaxed)) /
           static_cast<double>(capacity_);
}

void Shm_ring_writer::discard() {
    if (pending_.empty()) throw std::logic_error("Shm_ring_writer: discard without allocate");
    pending_.pop_back();
    reserved_ = pending_.empty() ? map_.control().head.load(std::memory_order_relaxed) : pending_.back();
}

Shm_ring_reader::Shm_ring_reader(std::string name, const Stop_flag& stop) : name_(std::move(name)), stop_(stop) {
    Fd fd;
    struct stat info {};
    // The writer may not have started yet: wait for a complete segment.
    wait_until(
        stop_,
        [&] {
            if (!fd) fd = Fd(::shm_open(name_.c_str(), O_RDWR | O_CLOEXEC, 0600));
            if (!fd || ::fstat(fd.get(), &info) != 0 || static_cast<std::size_t>(info.st_size) <= control_bytes)
                return false;
            if (!map_) map_ = map_segment(fd.get(), static_cast<std::size_t>(info.st_size), name_);
            return map_.control().magic.load(std::memory_order_acquire) == ring_magic;
        },
        [] {});
    Ring_control& control = map_.control();
    if (control.version != ring_version)
        throw Ring_error("ring " + name_ + " has version " + std::to_string(control.version) + ", this reader knows " +
                         std::to_string(ring_version));
    capacity_ = control.capacity;
    if (control_bytes + capacity_ != static_cast<std::uint64_t>(info.st_size))
        throw Ring_error("ring " + name_ + " header says " + std::to_string(capacity_) + " data bytes, the segment has " +
                         std::to_string(info.st_size - control_bytes));
    // The writer is another program: check its geometry before using it.
    if (capacity_ % record_alignment != 0 || capacity_ < 2 * record_alignment)
        throw Ring_error("ring " + name_ + " has a capacity of " + std::to_string(capacity_) +
                         " data bytes; expected a multiple of " + std::to_string(record_alignment) + ", at least " +
                         std::to_string(2 * record_alignment));
    if (const std::uint64_t tail = control.tail.load(std::memory_order_acquire); tail % record_alignment != 0)
        throw Ring_error("ring " + name_ + " has tail " + std::to_string(tail) + ", not a multiple of " +
                         std::to_string(record_alignment));
    pid_t holder = 0;
    while (!control.reader_pid.compare_exchange_strong(holder, ::getpid())) {
        if (alive(holder))
            throw Ring_error("ring " + name_ + " already has a live reader, pid " + std::to_string(holder));
        log_warning("taking over ring ", name_, " from dead reader pid ", holder);
    }
    read_ = control.tail.load(std::memory_order_acquire);  // resume after the last release
    resumed_ = read_ != 0;
    regions_.assign({map_.bytes()});
}

Shm_ring_reader::~Shm_ring_reader() {
    if (map_) {
        pid_t me = ::getpid();
        map_.control().reader_pid.compare_exchange_strong(me, 0);
    }
}

pid_t Shm_ring_reader::writer_pid() const { return map_.control().writer_pid.load(); }

std::span<const std::byte> Shm_ring_reader::next_if_ready() {
    // The writer publishes a wrap with the element after it, so one
    // published byte means next() finds an element without waiting.
    if (map_.control().head.load(std::memory_order_acquire) == read_) return {};
    return next();
}

std::span<const std::byte> Shm_ring_reader::next() {
    Ring_control& control = map_.control();
    while (true) {
        std::uint64_t head = control.head.load(std::memory_order_acquire);
        if (read_ == head) {
            wait_until(
                stop_,
                [&] {
                    head = control.head.load(std::memory_order_acquire);
                    return read_ != head || control.closed.load(std::memory_order_acquire) != 0;
                },
                [&] {
                    if (!alive(writer_pid()))
                        throw Ring_error("the writer of ring " + name_ + ", pid " + std::to_string(writer_pid()) +
                                         ", died; every element it published was read");
                });
            head = control.head.load(std::memory_order_acquire);  // closed comes after the last commit
            if (read_ == head) {
                const auto end = static_cast<Ring_end>(control.closed.load(std::memory_order_acquire));
                if (end == Ring_end::complete || end == Ring_end::stopped) {
                    end_ = end;
                    return {};
                }
                throw Ring_error("the writer of ring " + name_ + ", pid " + std::to_string(writer_pid()) +
                                 (end == Ring_end::failed ? ", failed" : ", closed it with unknown state " +
                                                                             std::to_string(static_cast<std::uint32_t>(end))) +
                                 " before finishing; every element it published was read");
            }
        }
        const std::uint64_t offset = read_ % capacity_;
        // The writer is another program: check before trusting its header.
        if (head < read_ || offset + sizeof(Record_header) > capacity_)
            throw Ring_error("ring " + name_ + " is corrupt at byte " + std::to_string(read_) + ": head " +
                             std::to_string(head));
        Record_header record;
        std::memcpy(&record, map_.data() + offset, sizeof record);
        if (record.kind == record_wrap && read_ + (capacity_ - offset) < head) {
            read_ += capacity_ - offset;
            continue;
        }
        // Sizes are checked before rounding, so a huge one cannot wrap.
        if (record.kind != record_element || record.size > capacity_ - offset - sizeof record ||
            record.size > head - read_ || record_bytes(record.size) > head - read_)
            throw Ring_error("ring " + name_ + " is corrupt at byte " + std::to_string(read_) + ": record kind " +
                             std::to_string(record.kind) + " size " + std::to_string(record.size));
        read_ += record_bytes(record.size);
        held_.push_back(read_);
        return {map_.data() + offset + sizeof record, record.size};
    }
}

void Shm_ring_reader::announce_target(std::uint64_t first_event_id) {
    map_.control().wanted_event.store(first_event_id, std::memory_order_release);
}

std::uint64_t Shm_ring_writer::wanted_event() const {
    return map_.control().wanted_event.load(std::memory_order_acquire);
}

void Shm_ring_reader::put_back() {
    held_.pop_back();
    read_ = held_.empty() ? map_.control().tail.load(std::memory_order_relaxed) : held_.back();
}

void Shm_ring_reader::release() {
    if (held_.empty()) throw std::logic_error("Shm_ring_reader: release without a held element");
    map_.control().tail.store(held_.front(), std::memory_order_release);
    held_.pop_front();
}

}  // namespace eb
