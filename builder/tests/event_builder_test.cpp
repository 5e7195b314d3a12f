#include "engine/event_builder.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "buffers/checking_writer.hpp"
#include "buffers/generator_reader.hpp"
#include "local_mesh.hpp"
#include "buffers/source_cursor.hpp"
#include "transport/tcp/tcp_transport.hpp"
#include "telemetry/unit_status.hpp"

namespace eb {
namespace {

constexpr std::uint32_t packing_factor = 50;
const Event_model model{Size_model::poisson, 40};

constexpr auto D = Rank_function::dummy;
constexpr auto RU = Rank_function::ru;
constexpr auto BU = Rank_function::bu;
constexpr auto RB = Rank_function::ru_bu;

struct Run_shape {
    std::vector<Rank_function> functions = {RB};  // by rank
    Barrier_kind barrier = Barrier_kind::none;
    std::uint32_t barrier_every = 1;
    unsigned data_threads = 1;  // each unit's: transport, generator and checker
    std::uint32_t events_per_mfp = packing_factor;
    bool receives_ahead = false;  // --verbs-depth 2
    std::uint32_t receive_window = 0;  // --receive-window
};

// Breaks every MFP a source hands out: a readout card gone bad.
class Corrupting_reader final : public Buffer_reader {
public:
    explicit Corrupting_reader(Buffer_reader& inner) : inner_(inner) {}
    std::span<const std::byte> next() override {
        const auto mfp = inner_.next();
        const std::byte* before = copy_.data();
        copy_.assign(mfp.begin(), mfp.end());
        if (copy_.data() != before) regions_.assign({std::span<const std::byte>(copy_.data(), copy_.capacity())});
        copy_[0] ^= std::byte{0xFF};  // the magic
        return copy_;
    }
    void release() override { inner_.release(); }
    const Memory_regions& regions() const override { return regions_; }

private:
    Buffer_reader& inner_;
    std::vector<std::byte> copy_;
    Memory_regions regions_;
};

// Passes everything on, writing a letter per call into `calls` (T: control
// transfer, R: data receives posted, S: data sends posted, W: data waited
// for), and asks `stop` once `stop_after` control transfers have completed
// (0: never): a reset that arrives in the middle of a cycle. Control
// messages go out as `rewrite` leaves a copy of them, where set: a peer
// that breaks the protocol.
class Watched_transport final : public Transport {
public:
    Watched_transport(Transport& inner, Stop_flag& stop, int stop_after = 0)
        : inner_(inner), stop_(stop), left_(stop_after) {}
    Rank rank() const override { return inner_.rank(); }
    Rank units() const override { return inner_.units(); }
    bool lost(Rank peer) const override { return inner_.lost(peer); }
    void lose(Rank peer, Link_failure failure, const std::string& detail) override {
        inner_.lose(peer, failure, detail);
    }
    bool transfer(std::span<const Send> sends, std::span<const Receive> receives) override {
        calls += 'T';
        std::vector<std::vector<std::byte>> copies;
        std::vector<Send> rewritten;
        if (rewrite)
            for (const Send& send : sends) {
                rewrite(copies.emplace_back(send.data.begin(), send.data.end()));
                rewritten.push_back({send.peer, copies.back()});
            }
        const bool done = inner_.transfer(rewrite ? std::span<const Send>(rewritten) : sends, receives);
        if (--left_ == 0) stop_.request();
        return done;
    }
    std::unique_ptr<Registered_memory> register_memory(std::span<const std::byte> region) override {
        return inner_.register_memory(region);
    }
    void post_data(std::span<const Send> sends, std::span<const Receive> receives) override {
        calls += receives.empty() ? 'S' : 'R';
        if (!receives.empty()) {
            std::vector<Rank>& batch = receive_batches.emplace_back();
            for (const Receive& receive : receives) batch.push_back(receive.peer);
        }
        inner_.post_data(sends, receives);
    }
    bool wait_data(std::span<const Rank> sent_to, std::span<const Rank> received_from) override {
        calls += 'W';
        return inner_.wait_data(sent_to, received_from);
    }
    void quiesce() override { inner_.quiesce(); }

    std::string calls;
    std::vector<std::vector<Rank>> receive_batches;  // the peers of each post of receives
    std::function<void(std::vector<std::byte>&)> rewrite;

private:
    Transport& inner_;
    Stop_flag& stop_;
    int left_;
};

// One unit's RU and/or BU around `transport`, counting into `status`.
bool run_unit(const Run_shape& shape, const Rank_table& table, Transport& transport, Unit_status& status,
              std::uint64_t cycles, std::uint32_t unit_packing_factor = packing_factor, bool corrupt_source = false,
              Data_threads* threads = nullptr) {
    const Rank rank = transport.rank();
    std::optional<Generator_reader> generator;
    std::optional<Corrupting_reader> corrupting;
    std::optional<Checking_writer> output;
    Buffer_reader* source = nullptr;
    if (table.runs_ru(rank)) {
        source = &generator.emplace(rank, unit_packing_factor, model, (shape.receives_ahead ? 2 : 1) * table.bus().size(),
                                    threads);
        if (corrupt_source) source = &corrupting.emplace(*source);
    }
    if (table.runs_bu(rank)) {
        Mep_checker checker(table.rus(), unit_packing_factor, model, status.parse_errors(), {}, threads);
        checker.expect_sequence(table.bu_index(rank) * unit_packing_factor, unit_packing_factor * table.bus().size());
        output.emplace(std::move(checker), status);
    }
    std::optional<Barrier> barrier;
    if (shape.barrier != Barrier_kind::none) barrier.emplace(shape.barrier, transport, table.live_ranks());
    Event_builder builder({unit_packing_factor, shape.barrier_every, 1, true, shape.receives_ahead, shape.receive_window},
                          table, transport,
                          {source, output ? &*output : nullptr, barrier ? &*barrier : nullptr, &status.parse_errors(),
                           &status.events_dropped(), &status.events_in_doubt()});
    for (std::uint64_t cycle = 0; cycle < cycles; ++cycle)
        if (!builder.run_cycle(cycle * builder.chunks_per_cycle(), {1, false, false})) return false;
    return true;
}

// Runs every live unit of `shape` in its own thread over real loopback TCP;
// with `watched`, each through a Watched_transport kept there by rank.
std::vector<Status_snapshot> run_all(const Run_shape& shape, std::uint64_t cycles,
                                     std::vector<std::unique_ptr<Watched_transport>>* watched = nullptr) {
    const Rank_table table(shape.functions);
    std::vector<bool> live(table.units());
    for (Rank rank = 0; rank < table.units(); ++rank) live[rank] = table.live(rank);
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(table.units(), stop, live);
    if (watched != nullptr) watched->resize(table.units());
    std::vector<std::unique_ptr<Unit_status>> statuses;
    {
        std::vector<std::jthread> threads;
        for (const Rank rank : table.live_ranks()) {
            statuses.push_back(std::make_unique<Unit_status>(rank));
            threads.emplace_back([&, rank, status = statuses.back().get()] {
                const Busy_poll busy_poll{std::chrono::microseconds(default_busy_poll_us)};
                Data_threads data_threads(shape.data_threads, busy_poll);
                Tcp_transport transport(rank, std::move(meshes[rank]), stop, {}, Liveness{}, busy_poll, &data_threads);
                transport.count_traffic(status->traffic());
                Transport* used = &transport;
                if (watched != nullptr) used = ((*watched)[rank] = std::make_unique<Watched_transport>(transport, stop)).get();
                try {
                    run_unit(shape, table, *used, *status, cycles, shape.events_per_mfp, false, &data_threads);
                } catch (const std::exception& error) {
                    status->fail(error.what());
                    stop.request();
                }
            });
        }
    }
    std::vector<Status_snapshot> snapshots;
    for (const auto& status : statuses) snapshots.push_back(status->snapshot());
    return snapshots;
}

TEST(EventBuilder, EveryShapeBuildsEveryEventOfEveryBu) {
    const std::pair<const char*, Run_shape> shapes[] = {
        {"1 unit", {{RB}, Barrier_kind::none}},
        {"3 folded, tournament", {{RB, RB, RB}, Barrier_kind::tournament}},
        {"4 folded, centralized every 3 phases", {{RB, RB, RB, RB}, Barrier_kind::centralized, 3}},
        {"5 folded with dummies 1 and 3", {{RB, D, RB, D, RB}, Barrier_kind::tournament}},
        {"4 unfolded, RU and BU interleaved", {{RU, BU, RU, BU}, Barrier_kind::tournament, 2}},
        {"6 unfolded interleaved with a dummy", {{RU, BU, D, BU, RU, BU}, Barrier_kind::none}},
        // As the operator plans them: the RUs first, then the BUs.
        {"4 unfolded, RUs on 0-1, BUs on 2-3", {{RU, RU, BU, BU}, Barrier_kind::tournament}},
        {"5 unfolded, BUs first and a dummy between", {{BU, BU, D, RU, RU}, Barrier_kind::centralized, 2}},
        {"4 unfolded, three RUs and one BU", {{RU, RU, BU, RU}, Barrier_kind::none}},
        {"4 unfolded, one RU and three BUs", {{BU, BU, RU, BU}, Barrier_kind::tournament}},
    };
    constexpr std::uint64_t cycles = 4;
    struct Posting {
        const char* name;
        bool receives_ahead;
        std::uint32_t receive_window;
    };
    for (const Posting posting : {Posting{"", false, 0}, Posting{", receives a cycle ahead", true, 0},
                                  Posting{", one receive ahead", false, 1},
                                  Posting{", two receives ahead, a cycle ahead", true, 2}})
        for (auto [name, shape] : shapes) {
            SCOPED_TRACE(std::string(name) + posting.name);
            shape.receives_ahead = posting.receives_ahead;
            shape.receive_window = posting.receive_window;
            const Rank_table table(shape.functions);
            for (const Status_snapshot& unit : run_all(shape, cycles)) {
                EXPECT_EQ(unit.last_error, "") << "rank " << unit.rank;
                EXPECT_EQ(unit.events_built, table.runs_bu(unit.rank) ? cycles * packing_factor : 0)
                    << "rank " << unit.rank;
                EXPECT_EQ(unit.events_incomplete, 0u);
            }
        }
}

// --verbs-depth 2: from the second cycle on, a BU's receives are posted as
// soon as the cycle before settled (T: its proposals), before the headers;
// at depth 1 after them. The source had the next cycle's MFP ready, so
// every cycle after the first was announced a cycle ahead.
TEST(EventBuilder, ReceivesGoAheadOfTheHeadersOnceTheSetDecidedToGoOn) {
    for (const bool receives_ahead : {false, true}) {
        SCOPED_TRACE(receives_ahead ? "depth 2" : "depth 1");
        const Rank_table table({RB});
        Stop_flag stop;
        Tcp_transport tcp(0, Tcp_mesh::empty(1), stop);
        Watched_transport transport(tcp, stop);
        Unit_status status(0);
        EXPECT_TRUE(run_unit({.receives_ahead = receives_ahead}, table, transport, status, 3));
        // Each cycle: headers (T), receives (R), the MFP to itself (S), its
        // wait (W), proposals (T).
        EXPECT_EQ(transport.calls, receives_ahead ? "TRSWTR" "TSWTR" "TSWTR" : "TRSWT" "TRSWT" "TRSWT");
        const Status_snapshot counts = status.snapshot();
        EXPECT_EQ(counts.events_built, 3 * packing_factor) << counts.last_error;
        EXPECT_EQ(counts.meps_built, 3u);
    }
}

// --receive-window W: a BU posts its own receive and those of phases 1..W
// after the headers, then each phase's W - 1 phases ahead, so its RUs (which
// send on its credit over verbs) run at most W phases ahead of it. Rank 0
// of 4 receives from itself in phase 0, then from 3, 2, 1.
TEST(EventBuilder, AReceiveWindowPostsEachPhasesReceiveWPhasesAhead) {
    const std::vector<std::vector<Rank>> all = {{0, 3, 2, 1}};
    const std::pair<std::uint32_t, std::vector<std::vector<Rank>>> expected[] = {
        {0, all}, {1, {{0, 3}, {2}, {1}}}, {2, {{0, 3, 2}, {1}}}, {3, all}, {100, all}};
    for (const auto& [window, batches] : expected) {
        SCOPED_TRACE("window " + std::to_string(window));
        std::vector<std::unique_ptr<Watched_transport>> watched;
        const Run_shape shape{.functions = {RB, RB, RB, RB}, .receive_window = window};
        for (const Status_snapshot& unit : run_all(shape, 2, &watched)) {
            EXPECT_EQ(unit.last_error, "") << "rank " << unit.rank;
            EXPECT_EQ(unit.events_built, 2 * packing_factor) << "rank " << unit.rank;
        }
        std::vector<std::vector<Rank>> both = batches;
        both.insert(both.end(), batches.begin(), batches.end());  // two cycles
        EXPECT_EQ(watched[0]->receive_batches, both);
        if (window == 1) {
            EXPECT_EQ(watched[0]->calls, "TRSSWRSWRSWT" "TRSSWRSWRSWT") << "each receive before its phase's send";
        }
    }
}

// An RU whose header announces another size for its MFP than it announced
// a cycle ahead breaks the protocol: its BU, which laid the MEP out with the
// first, stops with an error naming the rank and both sizes.
TEST(EventBuilder, AnMfpSizeOtherThanTheOneAnnouncedACycleAheadIsAProtocolError) {
    const Rank_table table({RB});
    Stop_flag stop;
    Tcp_transport tcp(0, Tcp_mesh::empty(1), stop);
    Watched_transport transport(tcp, stop);
    transport.rewrite = [](std::vector<std::byte>& message) {
        if (message.size() != cycle_message_bytes(1)) return;  // a proposal
        auto header = load<Cycle_header>(message, 0);
        if (header.next_bytes != 0) header.next_bytes += 8;
        store(std::span(message), 0, header);
        seal(message);
    };
    Unit_status status(0);
    try {
        run_unit({.receives_ahead = true}, table, transport, status, 2);
        ADD_FAILURE() << "the second cycle's headers went unchecked";
    } catch (const Transport_error& error) {
        const std::string message = error.what();
        EXPECT_NE(message.find("rank 0 announced an MFP of "), std::string::npos) << message;
        EXPECT_NE(message.find(" bytes for chunk 1 where it announced "), std::string::npos) << message;
        EXPECT_NE(message.find(" a cycle ahead: the units speak different protocols"), std::string::npos) << message;
    }
}

// A source with nothing ready ahead (a ring its writer has not filled that
// far: here one slot) announces nothing, and its BU posts after the headers.
TEST(EventBuilder, ASourceWithNothingReadyAheadLeavesTheReceivesAfterTheHeaders) {
    const Rank_table table({RB});
    Stop_flag stop;
    Tcp_transport tcp(0, Tcp_mesh::empty(1), stop);
    Watched_transport transport(tcp, stop);
    Unit_status status(0);
    Generator_reader source(0, packing_factor, model, /*depth=*/1);
    Mep_checker checker(table.rus(), packing_factor, model, status.parse_errors());
    checker.expect_sequence(0, packing_factor);
    Checking_writer output(std::move(checker), status);
    Event_builder builder({packing_factor, 1, 1, true, /*receives_ahead=*/true}, table, transport,
                          {&source, &output, nullptr, &status.parse_errors(), &status.events_dropped(),
                           &status.events_in_doubt()});
    for (std::uint64_t chunk = 0; chunk < 3; ++chunk) ASSERT_TRUE(builder.run_cycle(chunk, {1, false, false}));
    EXPECT_EQ(transport.calls, "TRSWT" "TRSWT" "TRSWT");
    EXPECT_EQ(status.snapshot().events_built, 3 * packing_factor);
}

// The data operations of each phase dealt out over several threads per unit
// (--data-threads), the unit's own MFP copied in slices by them, its MFPs
// generated and its MEPs checked in parts on them: every event still built
// intact, and every byte counted once on each side.
TEST(EventBuilder, UnitsWithSeveralDataThreadsBuildEveryEventAndCountEveryByteOnce) {
    const std::pair<const char*, Run_shape> shapes[] = {
        {"4 folded, 2 threads", {{RB, RB, RB, RB}, Barrier_kind::tournament, 1, 2, 2048}},
        {"4 folded, 4 threads", {{RB, RB, RB, RB}, Barrier_kind::centralized, 2, 4, 2048}},
        {"5 folded with a dummy, 3 threads, MFPs too small to split", {{RB, RB, D, RB, RB}, Barrier_kind::tournament, 1, 3}},
        {"4 unfolded, 4 threads", {{RU, RU, BU, BU}, Barrier_kind::none, 1, 4, 3000}},
    };
    constexpr std::uint64_t cycles = 6;
    for (const auto& [name, shape] : shapes) {
        SCOPED_TRACE(name);
        const Rank_table table(shape.functions);
        std::uint64_t sent = 0, received = 0;
        for (const Status_snapshot& unit : run_all(shape, cycles)) {
            EXPECT_EQ(unit.last_error, "") << "rank " << unit.rank;
            EXPECT_EQ(unit.events_built, table.runs_bu(unit.rank) ? cycles * shape.events_per_mfp : 0)
                << "rank " << unit.rank;
            EXPECT_EQ(unit.events_incomplete, 0u);
            sent += unit.network_bytes_sent;
            received += unit.network_bytes_received;
            if (table.runs_ru(unit.rank) && table.bus().size() > 1) {
                EXPECT_GT(unit.network_bytes_sent, 0u) << "rank " << unit.rank;
            }
        }
        EXPECT_EQ(sent, received);
    }
}

TEST(EventBuilder, RejectedSourceMfpsAreCountedAndTheirEventsIncomplete) {
    const Rank_table table({RB});
    Stop_flag stop;
    Tcp_transport transport(0, Tcp_mesh::empty(1), stop);
    Unit_status status(0);
    EXPECT_TRUE(run_unit({}, table, transport, status, 3, packing_factor, /*corrupt_source=*/true));
    const auto counts = status.snapshot();
    EXPECT_EQ(counts.events_built, 0u);
    EXPECT_EQ(counts.events_incomplete, 3 * packing_factor) << "every event lost its only source";
    EXPECT_EQ(counts.meps_built, 3u) << "the schedule went on";
    EXPECT_EQ(counts.parse_errors[static_cast<std::size_t>(Parse_error::bad_magic)], 3u);
    EXPECT_NE(counts.last_error.find("fragment of type 0"), std::string::npos) << counts.last_error;
}

TEST(EventBuilder, UnitsWithDifferentPackingFactorsStopWithAClearError) {
    const Rank_table table({RB, RB});
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(2, stop);
    std::string errors[2];
    {
        std::vector<std::jthread> threads;
        for (Rank rank = 0; rank < 2; ++rank) {
            threads.emplace_back([&, rank] {
                Tcp_transport transport(rank, std::move(meshes[rank]), stop);
                Unit_status status(rank);
                try {
                    run_unit({{RB, RB}, Barrier_kind::none}, table, transport, status, 1, rank == 0 ? 50 : 60);
                } catch (const Transport_error& error) {
                    errors[rank] = error.what();
                }
            });
        }
    }
    for (const std::string& error : errors)
        EXPECT_NE(error.find("every unit needs the same --packing-factor"), std::string::npos) << error;
}

// A cycle asked to stop returns no decision (nullopt) and commits nothing;
// without the stop the same cycles build their MEPs.
TEST(EventBuilder, StopsWhenAskedAndReportsIt) {
    const Rank_table table({RB});
    Stop_flag stop;
    Tcp_transport transport(0, Tcp_mesh::empty(1), stop);
    Unit_status status(0);
    stop.request();
    EXPECT_FALSE(run_unit({}, table, transport, status, 3));
    EXPECT_EQ(status.snapshot().meps_built, 0u);

    Stop_flag not_stopped;
    Tcp_transport running(0, Tcp_mesh::empty(1), not_stopped);
    Unit_status running_status(0);
    EXPECT_TRUE(run_unit({}, table, running, running_status, 3));
    EXPECT_EQ(running_status.snapshot().meps_built, 3u);
}

// An output that takes MEPs of at most `limit` bytes and must never be asked
// for more.
class Small_output final : public Buffer_writer {
public:
    explicit Small_output(std::size_t limit) : limit_(limit) {}
    std::span<std::byte> allocate(std::size_t bytes) override {
        if (bytes > limit_) ADD_FAILURE() << "allocate(" << bytes << ") past max_element() " << limit_;
        mep_.resize(bytes);
        return mep_;
    }
    void commit() override {}
    void discard() override {}
    std::size_t max_element() const override { return limit_; }
    const Memory_regions& regions() const override { return regions_; }

private:
    std::size_t limit_;
    std::vector<std::byte> mep_;
    Memory_regions regions_;
};

TEST(EventBuilder, AMepOverWhatTheOutputTakesIsAnErrorBeforeAllocating) {
    const Rank_table table({RB});
    Stop_flag stop;
    Tcp_transport transport(0, Tcp_mesh::empty(1), stop);
    Unit_status status(0);
    Generator_reader source(0, packing_factor, model, 1);
    Small_output output(1000);
    Event_builder builder({packing_factor, 1, 1, true}, table, transport,
                          {&source, &output, nullptr, &status.parse_errors(), &status.events_dropped(), &status.events_in_doubt()});
    try {
        builder.run_cycle(0, {1, false, false});
        FAIL() << "a MEP over 1000 bytes was laid out";
    } catch (const Transport_error& error) {
        const std::string message = error.what();
        EXPECT_NE(message.find("over the 1000 this unit's output takes (largest: rank 0, "), std::string::npos)
            << message;
        EXPECT_NE(message.find("raise --ring-mib or lower --packing-factor"), std::string::npos) << message;
    }
}


// A session stopped once the cycle's MFPs are taken and its MEP laid out
// (after the headers) leaves the source and the output to the next session,
// which builds that cycle again from the same chunk: the MFPs it held are
// handed out again, the MEP it had allocated was given back.
TEST(EventBuilder, ACycleStoppedMidwayLeavesSourceAndOutputToTheNextSession) {
    const Rank_table table({RB});
    Unit_status status(0);
    Generator_reader generator(0, packing_factor, model, /*depth=*/1);
    Source_cursor source(generator, packing_factor);
    Mep_checker checker(table.rus(), packing_factor, model, status.parse_errors());
    checker.expect_sequence(0, packing_factor);
    Checking_writer output(std::move(checker), status);
    const Event_builder::Unit unit{&source, &output, nullptr, &status.parse_errors(), &status.events_dropped(), &status.events_in_doubt()};
    {
        Stop_flag stop;
        Tcp_transport tcp(0, Tcp_mesh::empty(1), stop);
        Watched_transport transport(tcp, stop, /*stop_after=*/1);
        Event_builder builder({packing_factor, 1, 1, true}, table, transport, unit);
        EXPECT_FALSE(builder.run_cycle(0, {1, false, false}));
    }
    source.start_at(0);
    Stop_flag stop;
    Tcp_transport transport(0, Tcp_mesh::empty(1), stop);
    Event_builder builder({packing_factor, 1, 2, true}, table, transport, unit);
    for (std::uint64_t chunk = 0; chunk < 3; ++chunk) ASSERT_TRUE(builder.run_cycle(chunk, {2, false, false}));
    const Status_snapshot counts = status.snapshot();
    EXPECT_EQ(counts.events_built, 3 * packing_factor) << counts.last_error;
    EXPECT_EQ(counts.events_incomplete, 0u);
    EXPECT_EQ(counts.meps_built, 3u);
}

// A folded unit of `table` around `transport`: generated MFPs in, every MEP
// checked (its BU's events expected in sequence), counts in `status`.
struct Checked_unit {
    Checked_unit(const Rank_table& table, Transport& transport)
        : status(transport.rank()),
          source(transport.rank(), packing_factor, model, table.bus().size()),
          output(checker(table, transport.rank(), status), status),
          builder({packing_factor, 1, 1, true}, table, transport,
                  {&source, &output, nullptr, &status.parse_errors(), &status.events_dropped(), &status.events_in_doubt()}) {}

    static Mep_checker checker(const Rank_table& table, Rank rank, Unit_status& status) {
        Mep_checker checker(table.rus(), packing_factor, model, status.parse_errors());
        checker.expect_sequence(table.bu_index(rank) * packing_factor, packing_factor * table.bus().size());
        return checker;
    }

    Unit_status status;
    Generator_reader source;
    Checking_writer output;
    Event_builder builder;
};

// Four units, each in its own thread, through `cycles` cycles. Rank 1 loses
// rank 3 before cycle 2 (a link cut between them; ranks 0 and 2 still see
// both); rank 3 votes stop in cycle 2 if `stop_vote`.
struct Cut_run {
    std::vector<std::vector<Cycle_decision>> decisions;
    std::vector<std::vector<std::pair<Rank, Link_failure>>> losses;
    std::vector<Status_snapshot> counts;
    std::vector<std::string> errors;
};
Cut_run run_with_a_cut_link(std::uint64_t cycles, bool stop_vote) {
    constexpr Rank units = 4;
    const Rank_table table({RB, RB, RB, RB});
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(units, stop);
    Cut_run run{std::vector<std::vector<Cycle_decision>>(units),
                std::vector<std::vector<std::pair<Rank, Link_failure>>>(units), std::vector<Status_snapshot>(units),
                std::vector<std::string>(units)};
    std::vector<std::jthread> threads;
    for (Rank rank = 0; rank < units; ++rank) {
        threads.emplace_back([&, rank] {
            Tcp_transport transport(rank, std::move(meshes[rank]), stop,
                                    [&, rank](Rank peer, Link_failure failure, const std::string&) {
                                        run.losses[rank].emplace_back(peer, failure);
                                    });
            Checked_unit unit(table, transport);
            try {
                for (std::uint64_t cycle = 0; cycle < cycles; ++cycle) {
                    if (rank == 1 && cycle == 2) transport.lose(3, Link_failure::error, "the link is cut");
                    const Vote vote{1, false, stop_vote && rank == 3 && cycle == 2};
                    const auto decision = unit.builder.run_cycle(cycle * unit.builder.chunks_per_cycle(), vote);
                    if (!decision) break;
                    run.decisions[rank].push_back(*decision);
                    if (decision->stop) break;
                }
            } catch (const std::exception& error) {
                run.errors[rank] = error.what();
            }
            run.counts[rank] = unit.status.snapshot();
        });
    }
    threads.clear();
    return run;
}

bool lost_as(const std::vector<std::pair<Rank, Link_failure>>& losses, Rank peer, Link_failure failure) {
    return std::find(losses.begin(), losses.end(), std::pair{peer, failure}) != losses.end();
}

// The stop vote of rank 3, which rank 1 cannot hear, is taken by the whole
// set alike: every unit follows rank 0's proposal.
TEST(EventBuilder, AVoteOfAPeerOneUnitLostIsTakenAlikeByTheWholeSet) {
    const Cut_run run = run_with_a_cut_link(5, true);
    std::uint64_t built = 0, dropped = 0;
    for (Rank rank = 0; rank < 4; ++rank) {
        SCOPED_TRACE("rank " + std::to_string(rank));
        EXPECT_EQ(run.errors[rank], "");
        ASSERT_EQ(run.decisions[rank].size(), 3u) << "every unit stops after cycle 2";
        EXPECT_TRUE(run.decisions[rank][2].stop);
        built += run.counts[rank].events_built;
        dropped += run.counts[rank].events_dropped;
        EXPECT_EQ(run.counts[rank].events_incomplete, 0u);
    }
    EXPECT_EQ(built, 10 * packing_factor) << "cycle 2: ranks 1 and 3 miss each other's MFP";
    EXPECT_EQ(built + dropped, 3 * 4 * packing_factor) << "every chunk counted once";
}

// A cut that lasts a second cycle puts the higher of its two ranks out for
// the whole set at the end of that cycle; the others build on, and every
// chunk is counted once.
TEST(EventBuilder, ALinkCutThatLastsPutsTheHigherRankOutForTheWholeSet) {
    constexpr std::uint64_t cycles = 6;
    const Cut_run run = run_with_a_cut_link(cycles, false);
    std::uint64_t built = 0, dropped = 0;
    for (Rank rank = 0; rank < 4; ++rank) {
        SCOPED_TRACE("rank " + std::to_string(rank));
        EXPECT_EQ(run.errors[rank], "");
        EXPECT_EQ(run.decisions[rank].size(), cycles);
        built += run.counts[rank].events_built;
        dropped += run.counts[rank].events_dropped;
    }
    EXPECT_TRUE(lost_as(run.losses[0], 3, Link_failure::excluded));
    EXPECT_TRUE(lost_as(run.losses[2], 3, Link_failure::excluded));
    EXPECT_TRUE(lost_as(run.losses[3], 0, Link_failure::excluded)) << "rank 3 learns it is out";
    EXPECT_FALSE(lost_as(run.losses[0], 1, Link_failure::excluded)) << "rank 1 stays";
    EXPECT_EQ(run.counts[3].events_dropped, packing_factor) << "only its MEP of cycle 2, when it was still in";
    // Cycles 0-1 built by all; 2 and 3 by ranks 0 and 2 only (rank 3 is
    // put out at the end of cycle 3, its link with rank 1 reported twice).
    EXPECT_EQ(built, (2 * 4 + 2 + 2) * packing_factor);
    EXPECT_EQ(built + dropped, cycles * 4 * packing_factor) << "every chunk counted once";
}

// One cycle at a time: each returns the set's decision from every unit's
// votes, so all units of the set pause or stop at the same cycle.
TEST(EventBuilder, EachCycleReturnsTheDecisionOfTheVotes) {
    const Rank_table table({RB, RB});
    Stop_flag stop;
    auto meshes = test::connect_local_mesh(2, stop);
    std::vector<std::vector<Cycle_decision>> decisions(2);
    std::string errors[2];
    {
        std::vector<std::jthread> threads;
        for (Rank rank = 0; rank < 2; ++rank) {
            threads.emplace_back([&, rank] {
                Tcp_transport transport(rank, std::move(meshes[rank]), stop);
                Checked_unit unit(table, transport);
                // Rank 1 votes pause in cycle 1 and stop in cycle 2; rank 0 never does.
                for (std::uint64_t cycle = 0; cycle < 3; ++cycle) {
                    const Vote vote{1, rank == 1 && cycle == 1, rank == 1 && cycle == 2};
                    const auto decision = unit.builder.run_cycle(cycle * unit.builder.chunks_per_cycle(), vote);
                    if (!decision) {
                        errors[rank] = "stopped";
                        return;
                    }
                    decisions[rank].push_back(*decision);
                }
                const Status_snapshot counts = unit.status.snapshot();
                if (counts.events_built != 3 * packing_factor)
                    errors[rank] = std::to_string(counts.events_built) + " events built: " + counts.last_error;
            });
        }
    }
    for (Rank rank = 0; rank < 2; ++rank) {
        SCOPED_TRACE("rank " + std::to_string(rank));
        EXPECT_EQ(errors[rank], "");
        ASSERT_EQ(decisions[rank].size(), 3u);
        EXPECT_FALSE(decisions[rank][0].pause || decisions[rank][0].stop);
        EXPECT_TRUE(decisions[rank][1].pause);
        EXPECT_FALSE(decisions[rank][1].stop);
        EXPECT_TRUE(decisions[rank][2].stop);
        for (const Cycle_decision& decision : decisions[rank]) EXPECT_EQ(decision.switch_to, 0u);
    }
}

}  // namespace
}  // namespace eb
