// The shared-memory ring's two ends in one process: how the writer closes it
// reaches the reader, and the reader refuses a ring whose header lies.

#include "buffers/shm_ring.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "formats/mfp.hpp"
#include "formats/wire_format.hpp"

namespace eb {
namespace {

std::string test_ring(const char* what) {
    return "/eb-ringtest-" + std::to_string(::getpid()) + "-" + what;
}

// Writes one element of `bytes` bytes, each `value`.
void put(Shm_ring_writer& writer, std::size_t bytes, std::byte value) {
    const auto out = writer.allocate(bytes);
    std::memset(out.data(), static_cast<int>(value), out.size());
    writer.commit();
}

// Writes the MFP of source 1 for events first .. first + 9.
void put_mfp(Shm_ring_writer& writer, std::uint64_t first) {
    const std::vector<std::uint16_t> sizes(10, 8);
    const auto out = writer.allocate(mfp_bytes(sizes));
    write_mfp(out, {1, first, 0}, sizes);
    writer.commit();
}

std::uint64_t first_event(std::span<const std::byte> mfp) { return load<Mfp_header>(mfp, 0).first_event_id; }

// A signal that lands while the ring's pages are reserved (a driver told
// to stop as it starts) interrupts posix_fallocate on tmpfs (EINTR) on
// Linux 6.1 (Debian 12, the verbs VM; RHEL 9's 5.14), where any pending
// signal does; newer kernels stop only for fatal ones, so there this
// passes either way. Signals wait until the pages are reserved: no
// reservation fails as if /dev/shm were full. SIGALRM every 20 us, handled
// without SA_RESTART, would interrupt every reservation of 256 MiB.
TEST(ShmRing, ASignalDuringTheReservationDoesNotFailIt) {
    struct sigaction quiet {};
    quiet.sa_handler = [](int) {};
    struct sigaction before {};
    ASSERT_EQ(::sigaction(SIGALRM, &quiet, &before), 0);
    const itimerval every{{0, 20}, {0, 20}};
    ASSERT_EQ(::setitimer(ITIMER_REAL, &every, nullptr), 0);
    Stop_flag stop;
    for (int i = 0; i < 5; ++i) {
        EXPECT_NO_THROW(Shm_ring_writer(test_ring("eintr"), std::size_t{256} << 20, stop)) << "reservation " << i;
    }
    const itimerval off{};
    ::setitimer(ITIMER_REAL, &off, nullptr);
    ::sigaction(SIGALRM, &before, nullptr);
}

// A unit joining a running set starts its readout driver's ring where the set is.
TEST(ShmRing, AnMfpSourceSkipsToTheEventTheSetIsAt) {
    Stop_flag stop;
    Shm_ring_writer writer(test_ring("skip"), 1 << 16, stop);
    Shm_ring_reader reader(test_ring("skip"), stop);
    for (std::uint64_t first = 0; first < 50; first += 10) put_mfp(writer, first);
    reader.skip_to(0);
    EXPECT_EQ(first_event(reader.next()), 0u) << "nothing skipped when the ring is there already";
    reader.release();
    EXPECT_EQ(writer.wanted_event(), 0u) << "no skip asked for yet";
    reader.skip_to(30);
    EXPECT_EQ(writer.wanted_event(), 30u) << "the writer may seek to where the reader skips";
    EXPECT_EQ(first_event(reader.next()), 30u);
    reader.release();
    try {
        reader.skip_to(20);  // the ring is at 40
        FAIL() << "a ring past the set's event cannot feed it";
    } catch (const std::runtime_error& error) {
        EXPECT_NE(std::string(error.what()).find("from event 40 on, past event 20"), std::string::npos) << error.what();
    }
    EXPECT_EQ(first_event(reader.next()), 40u) << "a refused skip consumes nothing";
    reader.release();
    put(writer, 4, std::byte{0});  // no MFP header: handed out for the RU's check to reject
    put_mfp(writer, 60);
    reader.skip_to(60);
    EXPECT_EQ(reader.next().size(), 4u);
}

TEST(ShmRing, AWriterLeftOnAnErrorIsReportedAsFailedAfterItsElements) {
    Stop_flag stop;
    std::optional<Shm_ring_writer> writer(std::in_place, test_ring("failed"), 1 << 16, stop);
    Shm_ring_reader reader(test_ring("failed"), stop);
    put(*writer, 100, std::byte{7});
    writer.reset();  // as on unwinding from an exception: neither finish() nor stop()
    EXPECT_EQ(reader.next().size(), 100u);
    reader.release();
    try {
        reader.next();
        FAIL() << "a failed writer must not look like the end of the data";
    } catch (const Ring_error& error) {
        EXPECT_NE(std::string(error.what()).find("failed"), std::string::npos) << error.what();
    }
}

TEST(ShmRing, FinishedAndStoppedWritersEndTheDataDistinctly) {
    for (const bool finish : {true, false}) {
        Stop_flag stop;
        std::optional<Shm_ring_writer> writer(std::in_place, test_ring("end"), 1 << 16, stop);
        Shm_ring_reader reader(test_ring("end"), stop);
        put(*writer, 10, std::byte{1});
        if (finish) {
            const auto element = reader.next();  // drain() waits for this release
            EXPECT_EQ(element.size(), 10u);
            reader.release();
            writer->finish();
        } else {
            writer->stop();
            EXPECT_EQ(reader.next().size(), 10u);
            reader.release();
        }
        writer.reset();
        EXPECT_TRUE(reader.next().empty());
        EXPECT_EQ(reader.end(), finish ? Ring_end::complete : Ring_end::stopped);
    }
}

// A segment as a foreign writer might make it: `capacity` in the header.
class Forged_ring {
public:
    Forged_ring(const std::string& name, std::uint64_t capacity, std::uint64_t tail) : name_(name) {
        const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
        EXPECT_GE(fd, 0);
        const std::size_t bytes = 4096 + capacity;
        EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
        void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        auto* control = static_cast<unsigned char*>(base);
        const std::uint32_t version = 1;
        const std::int32_t pid = ::getpid();
        const std::uint64_t magic = 0x474E495242452D45;
        std::memcpy(control + 8, &version, sizeof version);
        std::memcpy(control + 16, &capacity, sizeof capacity);
        std::memcpy(control + 24, &pid, sizeof pid);
        std::memcpy(control + 128, &tail, sizeof tail);
        std::memcpy(control + 64, &tail, sizeof tail);  // head: nothing published
        std::memcpy(control, &magic, sizeof magic);
        ::munmap(base, bytes);
    }
    ~Forged_ring() { ::shm_unlink(name_.c_str()); }

private:
    std::string name_;
};

TEST(ShmRing, TheReaderRefusesARingWithAnImpossibleGeometry) {
    Stop_flag stop;
    {
        const Forged_ring ring(test_ring("odd"), 4096 + 100, 0);  // not a multiple of 64
        EXPECT_THROW(Shm_ring_reader(test_ring("odd"), stop), Ring_error);
    }
    {
        const Forged_ring ring(test_ring("tiny"), 64, 0);  // no room for a record and a wrap
        EXPECT_THROW(Shm_ring_reader(test_ring("tiny"), stop), Ring_error);
    }
    {
        const Forged_ring ring(test_ring("tail"), 4096, 8);  // tail inside a record
        EXPECT_THROW(Shm_ring_reader(test_ring("tail"), stop), Ring_error);
    }
}

}  // namespace
}  // namespace eb
