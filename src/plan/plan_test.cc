#include "plan/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace codespace {
namespace {

using ::testing::HasSubstr;

HostFacts Facts(bool confines, bool tools, bool can_filter) {
  HostFacts f;
  f.confines = confines;
  f.confine_error = confines ? "" : "bubblewrap not found";
  f.filter.tools = tools;
  f.filter.tools_error = tools ? "" : "nft not found on PATH";
  f.filter.namespace_ok = can_filter;
  f.filter.namespace_error = can_filter ? "" : "cannot create a network namespace: EPERM";
  f.filter.forwarding = true;
  f.verdict = DecideFilter(f.filter);
  return f;
}

// SPEC's plan table, every cell, written out literally rather than derived.
// confines × tools × CanFilter × policy. On an unconfined host CanFilter is "–": both values are
// listed and must give the same plan. A confining host with tools=no cannot have CanFilter=yes
// (tools is part of it); that row is still pinned, since CanFilter is what decides there.
TEST(DecidePlanTest, EveryCellOfTheTable) {
  using P = Plan;
  struct Row {
    bool confines, tools, can_filter;
    P none, allowlist, open;
    bool confined;
  };
  const Row table[] = {
      {true, true, true, P::kSevered, P::kFiltered, P::kShared, true},
      {true, false, true, P::kSevered, P::kSevered, P::kShared, true},  // can't filter w/o tools
      {true, true, false, P::kSevered, P::kSevered, P::kShared, true},
      {true, false, false, P::kSevered, P::kSevered, P::kShared, true},
      {false, true, true, P::kSevered, P::kFiltered, P::kShared, false},
      {false, true, false, P::kSevered, P::kFiltered, P::kShared, false},
      {false, false, true, P::kRefused, P::kRefused, P::kShared, false},
      {false, false, false, P::kRefused, P::kRefused, P::kShared, false},
  };
  for (const Row& r : table) {
    HostFacts f = Facts(r.confines, r.tools, r.can_filter);
    SCOPED_TRACE(PostureLine(f));
    EXPECT_EQ(DecidePlan(f, SandboxEgressPolicy::kNone).plan, r.none);
    EXPECT_EQ(DecidePlan(f, SandboxEgressPolicy::kAllowlist).plan, r.allowlist);
    EXPECT_EQ(DecidePlan(f, SandboxEgressPolicy::kOpen).plan, r.open);
    for (auto policy : {SandboxEgressPolicy::kNone, SandboxEgressPolicy::kAllowlist,
                        SandboxEgressPolicy::kOpen}) {
      EXPECT_EQ(DecidePlan(f, policy).confined, r.confined);
    }
  }
}

TEST(DecidePlanTest, SeveredAllowlistCarriesFilterUnavailableReason) {
  HostFacts f = Facts(true, true, false);
  PlanDecision d = DecidePlan(f, SandboxEgressPolicy::kAllowlist);
  EXPECT_EQ(d.plan, Plan::kSevered);
  EXPECT_EQ(d.reason, "cannot create a network namespace: EPERM");
  // A run that asked for no egress lost nothing: no reason.
  EXPECT_EQ(DecidePlan(f, SandboxEgressPolicy::kNone).reason, "");
}

TEST(DecidePlanTest, FilteredAndSharedHaveNoReason) {
  EXPECT_EQ(DecidePlan(Facts(true, true, true), SandboxEgressPolicy::kAllowlist).reason, "");
  EXPECT_EQ(DecidePlan(Facts(false, true, false), SandboxEgressPolicy::kAllowlist).reason, "");
  EXPECT_EQ(DecidePlan(Facts(false, false, false), SandboxEgressPolicy::kOpen).reason, "");
}

TEST(DecidePlanTest, RefusalNamesBothMissingPieces) {
  PlanDecision d = DecidePlan(Facts(false, false, false), SandboxEgressPolicy::kNone);
  EXPECT_EQ(d.plan, Plan::kRefused);
  EXPECT_THAT(d.reason, HasSubstr("bubblewrap not found"));
  EXPECT_THAT(d.reason, HasSubstr("nft not found on PATH"));
  EXPECT_THAT(d.reason, HasSubstr("egress \"none\""));
}

// An unconfined allowlist run is never planned Shared, whatever the facts: it is Filtered (and
// its setup filters it or aborts) or Refused.
TEST(DecidePlanTest, UnconfinedAllowlistNeverShared) {
  for (bool tools : {false, true}) {
    for (bool can : {false, true}) {
      Plan p = DecidePlan(Facts(false, tools, can), SandboxEgressPolicy::kAllowlist).plan;
      EXPECT_NE(p, Plan::kShared);
      EXPECT_NE(p, Plan::kSevered);  // nothing would enforce a severance there
    }
  }
}

TEST(PlanNamesTest, RoundTrip) {
  for (Plan p : {Plan::kSevered, Plan::kFiltered, Plan::kShared, Plan::kRefused}) {
    auto parsed = ParsePlan(PlanName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_FALSE(ParsePlan("sealed").ok());
  for (NetworkPosture n : {NetworkPosture::kNotRun, NetworkPosture::kFiltered,
                           NetworkPosture::kSevered, NetworkPosture::kShared}) {
    auto parsed = ParseNetworkPosture(NetworkPostureName(n));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, n);
  }
  EXPECT_EQ(PostureOfPlan(Plan::kSevered), NetworkPosture::kSevered);
  EXPECT_EQ(PostureOfPlan(Plan::kFiltered), NetworkPosture::kFiltered);
  EXPECT_EQ(PostureOfPlan(Plan::kShared), NetworkPosture::kShared);
  EXPECT_EQ(PostureOfPlan(Plan::kRefused), NetworkPosture::kNotRun);
}

}  // namespace
}  // namespace codespace
