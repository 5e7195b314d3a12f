#pragma once

// A builder pod's readout driver (eb-readout-emulator) and HLT consumer
// (eb-consumer) for every rank of a Controlled_set, as the operator runs
// them: no --peers, the unit described in their environment, the rank
// table mounted as a file. For the control suite's pod tests.

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controlled_set.hpp"
#include "test_support.hpp"

namespace eb::test {

// A run name no other test of this process, or iteration of one, has used:
// rings left by one must not meet the next.
inline std::string unique_run_name(std::string_view prefix) {
    static int made = 0;
    return std::string(prefix) + std::to_string(::getpid()) + "x" + std::to_string(made++);
}

class Pod_helpers {
public:
    // `table_body`: a configure body of the set; its table is what the pods mount.
    Pod_helpers(Controlled_set& set, const std::string& run, const std::string& table_body)
        : set_(set), run_(run), dir_(make_temp_dir()) {
        const std::string table = dir_ + "/ranks.json";
        const std::size_t start = table_body.find("\"table\":") + 8;
        std::ofstream(table) << table_body.substr(start, table_body.size() - 1 - start);  // the document alone
        for (const Rank rank : set.ranks())
            for (const std::string tool : {"eb-readout-emulator", "eb-consumer"})
                helpers_.push_back(std::make_unique<Child>(
                    "/usr/bin/env",
                    std::vector<std::string>{"EB_RANK=" + std::to_string(rank), "EB_PACKING_FACTOR=100",
                                             "EB_MFP_RING_MIB=4", "EB_RANK_TABLE=" + table, EB_TOOLS_DIR "/" + tool,
                                             "--run", run, "--fragment-size", "64"},
                    dir_ + "/" + tool + "-" + std::to_string(rank) + ".log"));
    }

    // A counter of the consumer's report, as the builder of `rank` shows it in /status.
    std::uint64_t consumed(Rank rank, std::string_view key) const {
        const std::string status = set_.status(rank);
        const std::size_t at = status.find("\"consumer\":{");
        return at == std::string::npos ? 0 : json_number(status.substr(at), key).value_or(0);
    }

    // The consumer of `rank`'s per-stream counts (docs/formats.md,
    // -mep-consumer-streams): held and lacked events by stream; empty while
    // it has published none.
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> streams(Rank rank) const {
        std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> counts;
        std::ifstream in("/dev/shm/eb-" + run_ + "-" + std::to_string(rank) + "-mep-consumer-streams");
        std::string name, held_word, lacked_word;
        std::uint64_t held = 0, lacked = 0;
        while (in >> name >> held_word >> held >> lacked_word >> lacked) counts[name] = {held, lacked};
        return counts;
    }

    Child& emulator(Rank rank) { return *helpers_[2 * rank]; }
    Child& consumer(Rank rank) { return *helpers_[2 * rank + 1]; }
    std::vector<std::unique_ptr<Child>>& all() { return helpers_; }

    // Ends every builder and helper by SIGTERM, as the kubelet ends a pod,
    // and expects nothing of the run left in /dev/shm.
    void terminate_all() {
        for (const Rank rank : set_.ranks()) set_.process(rank).signal(SIGTERM);
        for (const auto& helper : helpers_) helper->signal(SIGTERM);
        for (const Rank rank : set_.ranks()) EXPECT_TRUE(set_.process(rank).wait_exit(10s)) << rank;
        for (const auto& helper : helpers_) EXPECT_TRUE(helper->wait_exit(10s)) << helper->log();
        for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
            EXPECT_FALSE(entry.path().filename().string().starts_with("eb-" + run_ + "-")) << entry.path() << " left behind";
    }

    std::string logs() const {
        std::string logs;
        for (const auto& helper : helpers_) logs += helper->log();
        return logs + set_.logs();
    }

private:
    Controlled_set& set_;
    std::string run_;
    std::string dir_;
    std::vector<std::unique_ptr<Child>> helpers_;  // by rank: emulator, consumer
};

}  // namespace eb::test
