#include "limits/cgroup_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

namespace codespace {
namespace {

const RunLimits kAll{512ull << 20, 64, 1500, 0, 0};

TEST(PlanCgroupWrites, V1WritesEachControllersFiles) {
  std::vector<CgroupWrite> want = {
      {"memory", "memory.limit_in_bytes", "536870912", true},
      {"memory", "memory.memsw.limit_in_bytes", "536870912", false},
      {"pids", "pids.max", "64", true},
      {"cpu", "cpu.cfs_period_us", "100000", true},
      {"cpu", "cpu.cfs_quota_us", "150000", true},
  };
  EXPECT_EQ(PlanCgroupWrites(kAll, CgroupHierarchy::kV1), want);
}

TEST(PlanCgroupWrites, V2WritesTheUnifiedFiles) {
  std::vector<CgroupWrite> want = {
      {"", "memory.max", "536870912", true},
      {"", "memory.swap.max", "0", false},
      {"", "pids.max", "64", true},
      {"", "cpu.max", "150000 100000", true},
  };
  EXPECT_EQ(PlanCgroupWrites(kAll, CgroupHierarchy::kV2), want);
}

TEST(PlanCgroupWrites, NothingForUnsetLimitsOrNoHierarchy) {
  EXPECT_TRUE(PlanCgroupWrites(RunLimits{}, CgroupHierarchy::kV1).empty());
  EXPECT_TRUE(PlanCgroupWrites(RunLimits{0, 0, 0, 1 << 20, 64}, CgroupHierarchy::kV2).empty());
  EXPECT_TRUE(PlanCgroupWrites(kAll, CgroupHierarchy::kNone).empty());
  RunLimits half_core;
  half_core.cpu_millis = 500;
  EXPECT_EQ(PlanCgroupWrites(half_core, CgroupHierarchy::kV2).back().value, "50000 100000");
}

TEST(ParseUsage, V1) {
  std::map<std::string, std::string> t = {
      {"memory/memory.max_usage_in_bytes", "123456789\n"},
      {"memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"},
      {"cpuacct/cpuacct.stat", "user 250\nsystem 50\n"},
      {"pids/pids.peak", "17\n"},
  };
  RunUsage u = ParseUsage(CgroupHierarchy::kV1, t, 100);
  EXPECT_EQ(u.peak_memory_bytes, 123456789u);
  EXPECT_EQ(u.oom_kills, 2u);
  EXPECT_EQ(u.cpu_user_usec, 2500000u);
  EXPECT_EQ(u.cpu_system_usec, 500000u);
  EXPECT_EQ(u.peak_pids, 17u);
}

TEST(ParseUsage, V2) {
  std::map<std::string, std::string> t = {
      {"memory.peak", "4096\n"},
      {"memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n"},
      {"cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n"},
  };
  RunUsage u = ParseUsage(CgroupHierarchy::kV2, t, 100);
  EXPECT_EQ(u.peak_memory_bytes, 4096u);
  EXPECT_EQ(u.oom_kills, 1u);
  EXPECT_EQ(u.cpu_user_usec, 1000u);
  EXPECT_EQ(u.cpu_system_usec, 500u);
  EXPECT_FALSE(u.peak_pids.has_value());  // no pids.peak on this kernel: not measured
}

TEST(ParseUsage, MalformedOrMissingFilesLeaveFieldsUnset) {
  RunUsage u =
      ParseUsage(CgroupHierarchy::kV1, {{"memory/memory.max_usage_in_bytes", "lots"}}, 100);
  EXPECT_TRUE(u.empty());
}

TEST(ClassifyLimitKill, ASigkillWithAnOomKillIsTheMemoryLimit) {
  RunUsage u;
  u.oom_kills = 1;
  RunOutcome o = ClassifyLimitKill(RunOutcome::Signaled(SIGKILL), kAll, &u);
  EXPECT_EQ(o.kind, RunOutcome::Kind::kSignaled);
  EXPECT_EQ(o.signal, SIGKILL);
  EXPECT_EQ(o.reason, "killed: memory limit 512 MiB reached");
  EXPECT_EQ(u.limit_kill, "memory");
}

TEST(ClassifyLimitKill, AnythingElseIsLeftAsItWas) {
  RunUsage none;
  none.oom_kills = 0;
  EXPECT_TRUE(ClassifyLimitKill(RunOutcome::Signaled(SIGKILL), kAll, &none).reason.empty());
  RunUsage one;
  one.oom_kills = 1;
  // A background process was OOM-killed but the command itself exited.
  EXPECT_TRUE(ClassifyLimitKill(RunOutcome::Exited(0), kAll, &one).reason.empty());
  EXPECT_TRUE(ClassifyLimitKill(RunOutcome::Signaled(SIGTERM), kAll, &one).reason.empty());
  EXPECT_TRUE(ClassifyLimitKill(RunOutcome::Signaled(SIGKILL), RunLimits{}, &one).reason.empty());
  EXPECT_TRUE(one.limit_kill.empty());
}

}  // namespace
}  // namespace codespace
