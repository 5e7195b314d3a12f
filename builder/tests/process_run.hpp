#pragma once

// A test whose eb-builder processes and tools (consumer, readout emulator)
// are started one by one with their own flags (--peers mode): their logs
// are shown when it fails, and their shared-memory rings removed after it.
// EB_TOOLS_DIR names the folder of the built programs.

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/rank.hpp"
#include "test_support.hpp"

namespace eb::test {

using namespace std::chrono_literals;

// Processes of one test run and their logs, shown when the test fails.
class Run : public testing::Test {
protected:
    Run()
        : dir_(make_temp_dir()),
          run_name_("t" + std::to_string(::getpid()) + "-" + std::to_string(++runs_)),
          run_prefix_(run_name_) {}
    ~Run() override {
        if (HasFailure())
            for (const auto& [name, child] : children_) std::cerr << "--- " << name << " ---\n" << child->log();
        children_.clear();
        std::filesystem::remove_all(dir_);
        // Rings of processes a failed test had to kill are stale; a unit
        // would reclaim them on its next start, but test run names are unique.
        for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
            if (entry.path().filename().string().starts_with("eb-" + run_prefix_)) std::filesystem::remove(entry.path());
    }

    // "127.0.0.1:p,..." for `units` ranks; their HTTP ports are picked in
    // the same go, so no two can coincide.
    std::string peers(Rank units) {
        const std::vector<std::uint16_t> ports = free_ports(2 * units);
        http_ports_.assign(ports.begin() + units, ports.end());
        std::string list;
        for (Rank rank = 0; rank < units; ++rank)
            list += (list.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(ports[rank]);
        return list;
    }
    Child& start(const std::string& name, const std::string& tool, std::vector<std::string> args) {
        children_.emplace_back(name, std::make_unique<Child>(std::string(EB_TOOLS_DIR) + "/" + tool, args, dir_ + "/" + name + ".log"));
        return *children_.back().second;
    }
    // `tool` with `environment` ("NAME=value") added to this process's, as a pod's container gets it.
    Child& start_with_environment(const std::string& name, const std::string& tool,
                                  const std::vector<std::string>& environment, const std::vector<std::string>& args) {
        std::vector<std::string> command = environment;
        command.push_back(std::string(EB_TOOLS_DIR) + "/" + tool);
        command.insert(command.end(), args.begin(), args.end());
        children_.emplace_back(name, std::make_unique<Child>("/usr/bin/env", command, dir_ + "/" + name + ".log"));
        return *children_.back().second;
    }
    // The eb-builder of `rank` with an HTTP port of its own.
    Child& start_builder(Rank rank, std::vector<std::string> args) {
        args.insert(args.end(), {"--rank", std::to_string(rank), "--http-port", std::to_string(http_ports_.at(rank))});
        const std::vector<std::string> transport = transport_flags();
        args.insert(args.end(), transport.begin(), transport.end());
        return start("builder-" + std::to_string(rank), "eb-builder", args);
    }
    // Two units whose MEPs go to shared-memory rings (--ring-mib 1): rank 0's
    // consumer takes 2 MEPs and leaves (its ring fills, and after
    // `output_timeout_ms` rank 0 drops its MEPs), rank 1's reads them all.
    struct Stuck_consumer_pair {
        Child& stuck_builder;
        Child& builder;
        Child& stuck_consumer;
        Child& consumer;
    };
    Stuck_consumer_pair start_with_stuck_consumer(int output_timeout_ms) {
        const std::vector<std::string> common = {"--peers", peers(2), "--packing-factor", "100", "--run", run_name_,
                                                 "--ring-mib", "1", "--output", "shm", "--output-timeout-ms",
                                                 std::to_string(output_timeout_ms)};
        Child& stuck_builder = start_builder(0, common);
        Child& builder = start_builder(1, common);
        Child& stuck = start("stuck-consumer", "eb-consumer", with(common, {"--rank", "0", "--meps", "2"}));
        return {stuck_builder, builder, stuck, start("consumer", "eb-consumer", with(common, {"--rank", "1"}))};
    }
    bool ring_exists(Rank rank, const char* what) const {
        return std::filesystem::exists("/dev/shm/eb-" + run_name_ + "-" + std::to_string(rank) + "-" + what);
    }
    // The `tail` word of a ring (docs/formats.md): bytes its reader released.
    std::uint64_t released_bytes(Rank rank, const char* what) const {
        std::ifstream ring("/dev/shm/eb-" + run_name_ + "-" + std::to_string(rank) + "-" + what, std::ios::binary);
        std::uint64_t tail = 0;
        if (!ring.seekg(128) || !ring.read(reinterpret_cast<char*>(&tail), sizeof tail)) return 0;
        return tail;
    }
    // GET `path` from the builder of `rank` (peers() picked its HTTP port).
    std::optional<Http_reply> get(Rank rank, std::string_view path) const {
        return http_get(http_ports_.at(rank), path);
    }
    std::string status_body(Rank rank) const {
        const auto reply = get(rank, "/status");
        return reply && reply->status == 200 ? reply->body : "";
    }
    static std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
        args.insert(args.end(), more.begin(), more.end());
        return args;
    }

    std::string dir_;
    std::string run_name_;
    const std::string run_prefix_;  // of every run name this test uses

private:
    static inline int runs_ = 0;
    std::vector<std::uint16_t> http_ports_;  // by rank, from peers()
    std::vector<std::pair<std::string, std::unique_ptr<Child>>> children_;
};

}  // namespace eb::test
