#include "buffers/local_discard_writer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace eb {
namespace {

// A ring whose consumer is behind (`full`) or keeping up: hands out room of
// its own, or none within any patience.
class Ring_like final : public Buffer_writer {
public:
    bool full = false;
    std::vector<std::size_t> committed;  // sizes
    std::vector<std::chrono::milliseconds> patience;  // asked for, per allocation

    std::span<std::byte> allocate(std::size_t bytes) override {
        held_.emplace_back(bytes);
        return held_.back();
    }
    std::span<std::byte> allocate_within(std::size_t bytes, std::chrono::milliseconds wait) override {
        patience.push_back(wait);
        if (full) return {};
        return allocate(bytes);
    }
    void commit() override {
        committed.push_back(held_.front().size());
        held_.erase(held_.begin());
    }
    void discard() override { held_.pop_back(); }
    const Memory_regions& regions() const override { return regions_; }

private:
    std::vector<std::vector<std::byte>> held_;
    Memory_regions regions_;
};

class Tally final : public Mep_tally {
public:
    std::uint64_t meps = 0, discarded_meps = 0, dropped_events = 0;
    void add_mep(std::uint64_t, std::uint64_t, std::uint64_t) override { ++meps; }
    void add_discarded_mep(std::uint64_t events) override {
        ++discarded_meps;
        dropped_events += events;
    }
    void note_problem(std::string) override {}
};

TEST(LocalDiscardWriter, AMepTheOutputHasNoRoomForIsDroppedHereAndCounted) {
    Ring_like ring;
    Tally tally;
    Local_discard_writer writer(ring, std::chrono::milliseconds(5), 100, tally);

    writer.allocate(64);
    writer.commit();
    EXPECT_EQ(ring.committed, std::vector<std::size_t>{64}) << "room: handed on";

    ring.full = true;
    const std::uint64_t version = writer.regions().version();
    const auto scratch = writer.allocate(80);
    ASSERT_EQ(scratch.size(), 80u);
    EXPECT_NE(writer.regions().version(), version) << "the scratch buffer must be registered before use";
    bool scratch_listed = false;
    for (const auto span : writer.regions().spans())
        scratch_listed = scratch_listed || (span.data() <= static_cast<const std::byte*>(scratch.data()) &&
                                            scratch.data() + scratch.size() <= span.data() + span.size());
    EXPECT_TRUE(scratch_listed);
    writer.commit_incomplete();
    EXPECT_EQ(ring.committed.size(), 1u) << "nothing handed on";
    EXPECT_EQ(tally.discarded_meps, 1u);
    EXPECT_EQ(tally.dropped_events, 100u);
    EXPECT_EQ(writer.discarded(), 1u);

    // A MEP taken back (a cycle stopped midway) is neither handed on nor counted.
    writer.allocate(80);
    writer.discard();
    EXPECT_EQ(tally.discarded_meps, 1u);

    ring.full = false;
    const std::uint64_t before = writer.regions().version();
    writer.allocate(64);
    writer.commit();
    EXPECT_EQ(ring.committed.size(), 2u) << "room again: handed on";
    EXPECT_EQ(writer.regions().version(), before) << "the same memory: no new registration";
    writer.allocate(64);
    writer.commit();
    using std::chrono::milliseconds;
    EXPECT_EQ(ring.patience, (std::vector<milliseconds>{milliseconds(5), milliseconds(5), milliseconds(0),
                                                        milliseconds(0), milliseconds(5)}))
        << "after a MEP found no room the next ones do not wait, until one finds room again";
}

// A MEP laid out ahead takes room there is now or none: nothing waits,
// nothing goes to the scratch buffer, nothing is counted.
TEST(LocalDiscardWriter, RoomAskedForWithinAPatienceIsTheInnerWritersOrNone) {
    Ring_like ring;
    Tally tally;
    Local_discard_writer writer(ring, std::chrono::milliseconds(5), 100, tally);
    ring.full = true;
    EXPECT_EQ(writer.allocate_within(64, std::chrono::milliseconds(0)).data(), nullptr);
    EXPECT_EQ(tally.discarded_meps, 0u);
    ring.full = false;
    ASSERT_EQ(writer.allocate_within(64, std::chrono::milliseconds(0)).size(), 64u);
    writer.commit();
    EXPECT_EQ(ring.committed, std::vector<std::size_t>{64});
    EXPECT_EQ(tally.discarded_meps, 0u);
    using std::chrono::milliseconds;
    EXPECT_EQ(ring.patience, (std::vector<milliseconds>{milliseconds(0), milliseconds(0)}));
}

}  // namespace
}  // namespace eb
