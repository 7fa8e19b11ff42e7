#include "worker/retention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

namespace codespace {
namespace {

using ::testing::HasSubstr;

TEST(ParseDurationTest, Table) {
  EXPECT_EQ(*ParseDuration("30d"), std::chrono::seconds(30 * 86400));
  EXPECT_EQ(*ParseDuration("12h"), std::chrono::seconds(12 * 3600));
  EXPECT_EQ(*ParseDuration("90m"), std::chrono::seconds(90 * 60));
  EXPECT_EQ(*ParseDuration("0s"), std::chrono::seconds(0));
  EXPECT_EQ(*ParseDuration("2w"), std::chrono::seconds(14 * 86400));
  for (const char* bad : {"", "d", "30", "-1d", "1.5d", "30y", "d30", "99999999999999999d"}) {
    auto r = ParseDuration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("s, m, h, d or w")) << bad;
  }
}

TEST(ShouldPruneTest, OnlyEndedRunsOlderThanTheAge) {
  const int64_t now = 10'000'000;
  auto rec = [](RunState st, int64_t created, int64_t ended) {
    RunRecord r;
    r.state = st;
    r.created_ms = created;
    r.ended_ms = ended;
    return r;
  };
  const auto age = std::chrono::seconds(1000);  // 1,000,000 ms
  struct Case {
    RunRecord r;
    bool want;
  };
  for (const auto& c : std::vector<Case>{
           {rec(RunState::kExited, 1, 8'000'000), true},
           {rec(RunState::kExited, 1, 9'000'000), true},   // exactly the age
           {rec(RunState::kExited, 1, 9'000'001), false},  // younger
           {rec(RunState::kRefused, 100, 0), true},        // never started: its creation
           {rec(RunState::kCancelled, 1, 2), true},
           {rec(RunState::kLost, 1, 2), true},
           {rec(RunState::kAborted, 1, 2), true},
           {rec(RunState::kRunning, 1, 0), false},  // in flight, however old
           {rec(RunState::kQueued, 1, 0), false},
       }) {
    EXPECT_EQ(ShouldPrune(c.r, now, age), c.want)
        << RunStateName(c.r.state) << " " << c.r.created_ms << " " << c.r.ended_ms;
  }
}

TEST(PruneAfterFromEnvironmentTest, UnsetKeepsEverythingAndABadValueIsNamed) {
  ::unsetenv("CODESPACE_PRUNE_AFTER");
  auto none = PruneAfterFromEnvironment();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ::setenv("CODESPACE_PRUNE_AFTER", "30d", 1);
  auto month = PruneAfterFromEnvironment();
  ASSERT_TRUE(month.ok());
  EXPECT_EQ(**month, std::chrono::seconds(30 * 86400));
  ::setenv("CODESPACE_PRUNE_AFTER", "soon", 1);
  auto bad = PruneAfterFromEnvironment();
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("CODESPACE_PRUNE_AFTER"));
  ::unsetenv("CODESPACE_PRUNE_AFTER");
}

}  // namespace
}  // namespace codespace
