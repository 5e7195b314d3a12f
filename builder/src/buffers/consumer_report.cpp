#include "buffers/consumer_report.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <stdexcept>

#include "base/fd.hpp"
#include "base/socket.hpp"
#include "buffers/shm_text.hpp"

namespace eb {

inline constexpr std::uint64_t report_magic = 0x54524F5045522D45;  // "E-REPORT"

struct Consumer_report_segment {
    std::atomic<std::uint64_t> magic;  // stored last by the consumer, with release
    std::atomic<std::uint64_t> meps, events_complete, events_incomplete, rejected;
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "report counters must be lock-free across processes");

void Segment_unmap::operator()(Consumer_report_segment* segment) const {
    ::munmap(segment, sizeof(Consumer_report_segment));
}

namespace {
Mapped_report map_report(int fd, int protection, const std::string& name) {
    void* base = ::mmap(nullptr, sizeof(Consumer_report_segment), protection, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) throw std::runtime_error("mmap " + name + ": " + error_text(errno));
    return Mapped_report(static_cast<Consumer_report_segment*>(base));
}
}  // namespace

std::string consumer_report_name(const std::string& ring) { return ring + "-consumer"; }

std::string stream_tallies_name(const std::string& ring) { return ring + "-consumer-streams"; }

std::string render_stream_tallies(const std::map<std::string, Stream_tally>& tallies) {
    std::string text;
    for (const auto& [name, tally] : tallies)
        text += name + " held " + std::to_string(tally.held) + " lacked " + std::to_string(tally.lacked) + "\n";
    return text;
}

void publish_stream_tallies(const std::string& ring, const std::map<std::string, Stream_tally>& tallies) {
    write_shm_text(stream_tallies_name(ring), render_stream_tallies(tallies));
}

void remove_stream_tallies(const std::string& ring) { ::shm_unlink(stream_tallies_name(ring).c_str()); }

Consumer_report_writer::Consumer_report_writer(std::string ring) : name_(consumer_report_name(ring)) {
    ::shm_unlink(name_.c_str());  // a crashed consumer's, counting from 0 again
    const Fd fd(::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644));
    if (!fd) throw std::runtime_error("shm_open " + name_ + ": " + error_text(errno));
    try {
        if (::ftruncate(fd.get(), sizeof(Consumer_report_segment)) != 0)
            throw std::runtime_error("ftruncate " + name_ + ": " + error_text(errno));
        segment_ = map_report(fd.get(), PROT_READ | PROT_WRITE, name_);
    } catch (...) {
        ::shm_unlink(name_.c_str());  // no half-made segment left behind
        throw;
    }
    segment_->magic.store(report_magic, std::memory_order_release);
}

Consumer_report_writer::~Consumer_report_writer() { ::shm_unlink(name_.c_str()); }

void Consumer_report_writer::publish(const Consumer_counts& counts) {
    segment_->rejected.store(counts.rejected, std::memory_order_relaxed);
    segment_->events_incomplete.store(counts.events_incomplete, std::memory_order_relaxed);
    segment_->events_complete.store(counts.events_complete, std::memory_order_relaxed);
    segment_->meps.store(counts.meps, std::memory_order_release);
}

std::optional<Consumer_counts> Consumer_report_reader::read() {
    // Looks again once a second: a consumer that came back (restarted)
    // published a new segment under the same name.
    if (const auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        now >= next_look_ns_) {
        next_look_ns_ = now + 1'000'000'000;
        const Fd fd(::shm_open(name_.c_str(), O_RDONLY | O_CLOEXEC, 0));
        struct stat info {};
        if (fd && ::fstat(fd.get(), &info) == 0 && static_cast<std::size_t>(info.st_size) >= sizeof(Consumer_report_segment) &&
            (!segment_ || info.st_ino != inode_)) {
            segment_ = map_report(fd.get(), PROT_READ, name_);
            inode_ = info.st_ino;
        }
    }
    // A consumer that left keeps its last counts here.
    if (!segment_) return std::nullopt;
    if (segment_->magic.load(std::memory_order_acquire) != report_magic) return std::nullopt;
    Consumer_counts counts;
    counts.meps = segment_->meps.load(std::memory_order_acquire);
    counts.events_complete = segment_->events_complete.load(std::memory_order_relaxed);
    counts.events_incomplete = segment_->events_incomplete.load(std::memory_order_relaxed);
    counts.rejected = segment_->rejected.load(std::memory_order_relaxed);
    return counts;
}

}  // namespace eb
