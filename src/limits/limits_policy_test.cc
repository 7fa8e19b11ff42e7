#include "limits/limits_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace codespace {
namespace {

using ::testing::HasSubstr;

LimitsFacts Host(CgroupHierarchy h) {
  LimitsFacts f;
  f.hierarchy = h;
  if (h == CgroupHierarchy::kNone) f.unavailable_reason = "the cgroup root /nowhere does not exist";
  return f;
}

RunLimits Memory(uint64_t bytes) {
  RunLimits l;
  l.memory_bytes = bytes;
  return l;
}

TEST(DecideLimits, AskedLimitsPassThroughOnAHostThatEnforcesThem) {
  for (auto h : {CgroupHierarchy::kV1, CgroupHierarchy::kV2}) {
    RunLimits asked{512ull << 20, 64, 1500, 64ull << 20, 1024};
    LimitsDecision d = DecideLimits(Host(h), /*confined=*/true, asked);
    EXPECT_TRUE(d.admitted) << d.reason;
    EXPECT_EQ(d.limits, asked);
  }
}

TEST(DecideLimits, LimitsOnAHostWithoutCgroupsAreRefusedWithTheReason) {
  for (const RunLimits& asked :
       {Memory(1 << 30), RunLimits{0, 10, 0, 0, 0}, RunLimits{0, 0, 500, 0, 0}}) {
    LimitsDecision d = DecideLimits(Host(CgroupHierarchy::kNone), true, asked);
    EXPECT_FALSE(d.admitted);
    EXPECT_THAT(d.reason, HasSubstr("limits=none"));
    EXPECT_THAT(d.reason, HasSubstr("/nowhere does not exist"));
  }
  // tmp size and open files need no cgroup.
  EXPECT_TRUE(
      DecideLimits(Host(CgroupHierarchy::kNone), true, RunLimits{0, 0, 0, 1 << 20, 64}).admitted);
  EXPECT_TRUE(DecideLimits(Host(CgroupHierarchy::kNone), true, RunLimits{}).admitted);
}

TEST(DecideLimits, AboveAMaximumIsRefusedNotLowered) {
  LimitsFacts f = Host(CgroupHierarchy::kV1);
  f.settings.maxima = {2ull << 30, 512, 2000, 1ull << 30, 4096};
  struct Case {
    RunLimits asked;
    const char* words;
  } cases[] = {
      {Memory(4ull << 30),
       "--memory 4 GiB is above this worker's maximum of 2 GiB (CODESPACE_MAX_MEMORY)"},
      {{0, 513, 0, 0, 0}, "--pids 513 is above this worker's maximum of 512 (CODESPACE_MAX_PIDS)"},
      {{0, 0, 2500, 0, 0}, "--cpus 2.5 cores is above this worker's maximum of 2 cores"},
      {{0, 0, 0, 2ull << 30, 0}, "--tmp-size 2 GiB is above"},
      {{0, 0, 0, 0, 8192}, "--nofile 8192 is above"},
  };
  for (const Case& c : cases) {
    LimitsDecision d = DecideLimits(f, true, c.asked);
    EXPECT_FALSE(d.admitted) << c.words;
    EXPECT_THAT(d.reason, HasSubstr(c.words));
  }
  EXPECT_TRUE(DecideLimits(f, true, f.settings.maxima).admitted);  // at the maximum is fine
}

TEST(DecideLimits, DefaultsFillWhatTheRunDidNotSet) {
  LimitsFacts f = Host(CgroupHierarchy::kV2);
  f.settings.defaults = {1ull << 30, 256, 1000, 0, 0};
  LimitsDecision d = DecideLimits(f, true, RunLimits{0, 32, 0, 0, 0});
  ASSERT_TRUE(d.admitted);
  EXPECT_EQ(d.limits, (RunLimits{1ull << 30, 32, 1000, 0, 0}));
}

TEST(DecideLimits, RequireLimitsRefusesARunWithoutAny) {
  LimitsFacts f = Host(CgroupHierarchy::kV1);
  f.settings.require = true;
  LimitsDecision d = DecideLimits(f, true, RunLimits{});
  EXPECT_FALSE(d.admitted);
  EXPECT_THAT(d.reason, HasSubstr("CODESPACE_REQUIRE_LIMITS=1"));
  f.settings.defaults.memory_bytes = 1 << 30;  // then the defaults apply
  EXPECT_TRUE(DecideLimits(f, true, RunLimits{}).admitted);
  // On a host without cgroups a required limit refuses every run.
  LimitsFacts none = Host(CgroupHierarchy::kNone);
  none.settings = f.settings;
  EXPECT_FALSE(DecideLimits(none, true, RunLimits{}).admitted);
}

TEST(DecideLimits, TmpSizeOfAnUnconfinedRunIsRefused) {
  LimitsDecision d =
      DecideLimits(Host(CgroupHierarchy::kV1), /*confined=*/false, RunLimits{0, 0, 0, 1 << 20, 0});
  EXPECT_FALSE(d.admitted);
  EXPECT_THAT(d.reason, HasSubstr("no private /tmp"));
}

TEST(DecideLimits, UnparsableSettingsRefuseEveryRun) {
  LimitsFacts f = Host(CgroupHierarchy::kV1);
  f.settings_error = "CODESPACE_MAX_MEMORY: \"lots\" is not a size";
  EXPECT_FALSE(DecideLimits(f, true, RunLimits{}).admitted);
}

TEST(ParseLimitSettings, ReadsDefaultsMaximaAndTheRoot) {
  std::map<std::string, std::string> env = {
      {"CODESPACE_DEFAULT_MEMORY", "1G"}, {"CODESPACE_MAX_MEMORY", "4G"},
      {"CODESPACE_MAX_PIDS", "512"},      {"CODESPACE_DEFAULT_CPUS", "0.5"},
      {"CODESPACE_REQUIRE_LIMITS", "1"},  {"CODESPACE_CGROUP_ROOT", "/tmp/fake"}};
  auto get = [&](const char* n) { return env.count(n) ? env[n] : std::string(); };
  auto s = ParseLimitSettings(get);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->defaults.memory_bytes, 1ull << 30);
  EXPECT_EQ(s->maxima.memory_bytes, 4ull << 30);
  EXPECT_EQ(s->maxima.pids, 512u);
  EXPECT_EQ(s->defaults.cpu_millis, 500u);
  EXPECT_TRUE(s->require);
  EXPECT_EQ(s->cgroup_root, "/tmp/fake");
  env["CODESPACE_MAX_MEMORY"] = "lots";
  EXPECT_THAT(ParseLimitSettings(get).status().message(), HasSubstr("CODESPACE_MAX_MEMORY"));
  env["CODESPACE_MAX_MEMORY"] = "512M";  // below the default
  EXPECT_THAT(ParseLimitSettings(get).status().message(),
              HasSubstr("is above CODESPACE_MAX_MEMORY"));
}

TEST(LimitsPosture, NamesTheHierarchyOrWhyNone) {
  EXPECT_EQ(LimitsPosture(Host(CgroupHierarchy::kV1)), "limits=v1");
  EXPECT_EQ(LimitsPosture(Host(CgroupHierarchy::kV2)), "limits=v2");
  EXPECT_EQ(LimitsPosture(Host(CgroupHierarchy::kNone)),
            "limits=none limitsUnavailable=\"the cgroup root /nowhere does not exist\"");
}

}  // namespace
}  // namespace codespace
