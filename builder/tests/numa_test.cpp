#include "app/numa.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace eb {
namespace {

TEST(Numa, ParsesCpuLists) {
    struct Case {
        std::string_view text;
        std::vector<int> cpus;
    };
    const Case cases[] = {
        {"", {}},          // a node with memory only
        {"\n", {}},
        {"0", {0}},
        {"0-3", {0, 1, 2, 3}},
        {"0-1,8-9\n", {0, 1, 8, 9}},
        {"5,3,4", {3, 4, 5}},
        {"0-2,1", {0, 1, 2}},
        {"7-7", {7}},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(testing::Message() << '"' << c.text << '"');
        const Cpu_list list = parse_cpu_list(c.text);
        EXPECT_TRUE(list.ok()) << list.error;
        EXPECT_EQ(list.cpus, c.cpus);
    }
}

TEST(Numa, RejectsMalformedCpuLists) {
    for (const std::string_view text :
         {",", "1,", ",1", "1,,2", "a", "1-", "-1", "3-1", "1-2-3", " 1", "1 ,2", "0x1", "1:2", "0-3:2", "65536",
          "0-99999", "99999999999"}) {
        SCOPED_TRACE(text);
        const Cpu_list list = parse_cpu_list(text);
        EXPECT_FALSE(list.ok());
        EXPECT_TRUE(list.cpus.empty());
        EXPECT_NE(list.error.find(std::string(text)), std::string::npos) << list.error;
    }
    EXPECT_EQ(parse_cpu_list("3-1").error, "cpulist \"3-1\": range 3-1 runs backwards");
}

void write_file(const std::filesystem::path& path, std::string_view text) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
}

// A sysfs with nodes 0 (CPUs 0-1), 1 (CPUs 2-3) and 2 (memory only), and RDMA
// devices on node 1, on an unknown node, on a node not there, and a broken one.
class FakeSysfs : public testing::Test {
protected:
    void SetUp() override {
        write_file(root + "/devices/system/node/node0/cpulist", "0-1\n");
        write_file(root + "/devices/system/node/node1/cpulist", "2-3\n");
        write_file(root + "/devices/system/node/node2/cpulist", "\n");
        write_file(root + "/devices/system/node/online", "0-2\n");
        write_file(root + "/class/infiniband/mlx5_0/device/numa_node", "1\n");
        write_file(root + "/class/infiniband/mlx5_1/device/numa_node", "-1\n");
        write_file(root + "/class/infiniband/mlx5_2/device/numa_node", "5\n");
        write_file(root + "/class/infiniband/mlx5_3/device/numa_node", "one\n");
    }

    const std::string root = test::make_temp_dir();
};

TEST_F(FakeSysfs, NothingRequestedIsNoPinningAndNoWarning) {
    const Numa_plan plan = plan_numa("", root);
    EXPECT_EQ(plan.node, std::nullopt);
    EXPECT_EQ(plan.warning, "");
}

TEST_F(FakeSysfs, ANodeThatExistsIsPinnedToItsCpus) {
    const Numa_plan plan = plan_numa("1", root);
    EXPECT_EQ(plan.requested, "1");
    EXPECT_EQ(plan.node, 1);
    EXPECT_EQ(plan.cpus, (std::vector<int>{2, 3}));
    EXPECT_EQ(plan.warning, "");
    EXPECT_EQ(plan.device_node, std::nullopt);
}

TEST_F(FakeSysfs, AMissingNodeRunsUnpinnedNamingTheNodesThere) {
    const Numa_plan plan = plan_numa("3", root);
    EXPECT_EQ(plan.node, std::nullopt);
    EXPECT_TRUE(plan.cpus.empty());
    EXPECT_EQ(plan.warning, "NUMA node 3 does not exist on this machine (nodes: 0, 1, 2); running unpinned");
    EXPECT_EQ(plan_numa("99999999999", root).warning,
              "NUMA node 99999999999 does not exist on this machine (nodes: 0, 1, 2); running unpinned");
}

TEST_F(FakeSysfs, ANodeWithoutCpusRunsUnpinned) {
    const Numa_plan plan = plan_numa("2", root);
    EXPECT_EQ(plan.node, std::nullopt);
    EXPECT_EQ(plan.warning, "NUMA node 2 has no CPUs; running unpinned");
}

TEST_F(FakeSysfs, ADeviceIsPinnedToItsNode) {
    const Numa_plan plan = plan_numa("mlx5_0", root);
    EXPECT_EQ(plan.requested, "mlx5_0");
    EXPECT_EQ(plan.node, 1);
    EXPECT_EQ(plan.device_node, 1);
    EXPECT_EQ(plan.cpus, (std::vector<int>{2, 3}));
    EXPECT_EQ(plan.warning, "");
}

TEST_F(FakeSysfs, ADeviceOfUnknownNodeRunsUnpinned) {
    const Numa_plan plan = plan_numa("mlx5_1", root);
    EXPECT_EQ(plan.node, std::nullopt);
    EXPECT_EQ(plan.device_node, std::nullopt);
    EXPECT_EQ(plan.warning, "RDMA device mlx5_1 does not know its NUMA node (" + root +
                                "/class/infiniband/mlx5_1/device/numa_node reads -1); running unpinned");
}

TEST_F(FakeSysfs, AMissingDeviceRunsUnpinnedNamingThePathLookedAt) {
    const Numa_plan plan = plan_numa("mlx5_9", root);
    EXPECT_EQ(plan.node, std::nullopt);
    EXPECT_EQ(plan.warning, "RDMA device mlx5_9 not found (no " + root +
                                "/class/infiniband/mlx5_9/device/numa_node); running unpinned");
}

TEST_F(FakeSysfs, OddDevicesRunUnpinned) {
    const Numa_plan elsewhere = plan_numa("mlx5_2", root);
    EXPECT_EQ(elsewhere.node, std::nullopt);
    EXPECT_EQ(elsewhere.device_node, 5);
    EXPECT_EQ(elsewhere.warning,
              "NUMA node 5 (RDMA device mlx5_2's) does not exist on this machine (nodes: 0, 1, 2); running unpinned");
    EXPECT_NE(plan_numa("mlx5_3", root).warning.find("holds no node number"), std::string::npos);
    EXPECT_EQ(plan_numa("../../etc", root).warning,
              "\"../../etc\" is neither a NUMA node number nor an RDMA device name; running unpinned");
}

TEST(Numa, ReportsAsJson) {
    Numa_report report{.requested = "mlx5_0", .node = 1, .pinned = false, .cpus_local = false,
                       .memory_local = true, .device_local = false, .warning = "cannot pin: \"EPERM\"\n"};
    EXPECT_EQ(numa_report_json(report),
              R"({"requested":"mlx5_0","node":1,"pinned":false,"cpus_local":false,"memory_local":true,)"
              R"("device_local":false,"warning":"cannot pin: \"EPERM\"\n"})");
    EXPECT_EQ(numa_report_json(Numa_report{}),
              R"({"requested":"","node":null,"pinned":false,"cpus_local":false,"memory_local":false,)"
              R"("device_local":null,"warning":""})");
}

TEST(Numa, MemoryIsConfinedWhenTheCpusetAllowsTheNodeAlone) {
    const std::string status = "Name:\teb-builder\nCpus_allowed_list:\t0-3\nMems_allowed:\t00000002\nMems_allowed_list:\t1\n";
    EXPECT_TRUE(memory_confined_to(status, 1));
    EXPECT_FALSE(memory_confined_to(status, 0));
    EXPECT_FALSE(memory_confined_to("Mems_allowed_list:\t0-1\n", 0));  // both nodes: not bound
    EXPECT_TRUE(memory_confined_to("Mems_allowed_list:\t0", 0));        // last line, no newline
    EXPECT_FALSE(memory_confined_to("Mems_allowed_list:\tx\n", 0));
    EXPECT_FALSE(memory_confined_to("Name:\tx\n", 0));  // no such line: not known to be bound
}

TEST(Numa, NothingRequestedChangesNothing) {
    const Numa_report report = apply_numa_plan(plan_numa(""));
    EXPECT_FALSE(report.pinned);
    EXPECT_EQ(report.node, std::nullopt);
    EXPECT_EQ(report.device_local, std::nullopt);
    EXPECT_EQ(report.warning, "");
}

// Runs `work` in a forked child, so pinning there leaves this process alone;
// returns what it returned.
std::string in_child(const std::function<std::string()>& work) {
    int pipe_ends[2];
    if (::pipe(pipe_ends) != 0) return "pipe failed";
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(pipe_ends[0]);
        const std::string result = work();
        for (std::size_t written = 0; written < result.size();) {
            const ssize_t n = ::write(pipe_ends[1], result.data() + written, result.size() - written);
            if (n <= 0) ::_exit(1);
            written += static_cast<std::size_t>(n);
        }
        ::_exit(0);
    }
    ::close(pipe_ends[1]);
    std::string result;
    char buffer[4096];
    for (ssize_t n; (n = ::read(pipe_ends[0], buffer, sizeof buffer)) > 0;)
        result.append(buffer, static_cast<std::size_t>(n));
    ::close(pipe_ends[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    return result;
}

constexpr const char* real_node0 = "/sys/devices/system/node/node0";

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

TEST(Numa, PinsToARealNode) {
    if (!std::filesystem::exists(real_node0)) EB_UNAVAILABLE("no " << real_node0 << " on this machine");
    const std::string json = in_child([] { return numa_report_json(apply_numa_plan(plan_numa("0"))); });
    if (contains(json, "Operation not permitted")) EB_UNAVAILABLE("pinning not permitted here: " << json);
    EXPECT_TRUE(contains(json, R"("requested":"0","node":0,"pinned":true,"cpus_local":true,"memory_local":true,)"
                               R"("device_local":null,"warning":"")"))
        << json;
}

TEST(Numa, ADeviceOnTheRealNodeIsLocal) {
    if (!std::filesystem::exists(real_node0)) EB_UNAVAILABLE("no " << real_node0 << " on this machine");
    // The real node 0's CPUs, and an RDMA device on it.
    const std::string root = test::make_temp_dir();
    std::ifstream real_cpulist(std::string(real_node0) + "/cpulist");
    std::string cpulist;
    std::getline(real_cpulist, cpulist);
    write_file(root + "/devices/system/node/node0/cpulist", cpulist);
    write_file(root + "/class/infiniband/mlx5_0/device/numa_node", "0\n");

    const std::string json = in_child([&] { return numa_report_json(apply_numa_plan(plan_numa("mlx5_0", root))); });
    if (contains(json, "Operation not permitted")) EB_UNAVAILABLE("pinning not permitted here: " << json);
    EXPECT_TRUE(contains(json, R"("pinned":true,"cpus_local":true,"memory_local":true,"device_local":true,)")) << json;
}

TEST(Numa, AFailedPinIsAWarning) {
    if (!std::filesystem::exists(real_node0)) EB_UNAVAILABLE("no " << real_node0 << " on this machine");
    // No machine has CPU 65535 online: sched_setaffinity refuses, the builder runs on.
    const Numa_plan plan{.requested = "0", .node = 0, .cpus = {65535}, .warning = "", .device_node = std::nullopt};
    const std::string json = in_child([&] { return numa_report_json(apply_numa_plan(plan)); });
    EXPECT_TRUE(contains(json, R"("pinned":false,"cpus_local":false,)")) << json;
    EXPECT_TRUE(contains(json, "cannot pin to NUMA node 0: sched_setaffinity: Invalid argument")) << json;
}

}  // namespace
}  // namespace eb
