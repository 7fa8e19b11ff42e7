#include "posture/host_facts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace codespace {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

FilterParts Parts(bool tools, bool ns, bool fwd) {
  FilterParts p;
  p.tools = tools;
  p.tools_error = tools ? "" : "nft not found on PATH";
  p.namespace_ok = ns;
  p.namespace_error = ns ? "" : "cannot create a network namespace: Operation not permitted";
  p.forwarding = fwd;
  p.forwarding_error = fwd ? "" : "net.ipv4.ip_forward is 0 and not writable";
  return p;
}

// The probe truth table: every combination of tools × namespace × forwarding.
TEST(DecideFilterTest, TruthTable) {
  struct Row {
    bool tools, ns, fwd;
    bool can_filter;
    const char* reason;  // substring of FilterUnavailableReason; "" when it can filter
  };
  const Row rows[] = {
      {false, false, false, false, "nft not found"},
      {false, false, true, false, "nft not found"},
      {false, true, false, false, "nft not found"},
      {false, true, true, false, "nft not found"},
      {true, false, false, false, "cannot create a network namespace"},
      {true, false, true, false, "cannot create a network namespace"},
      {true, true, false, false, "ip_forward is 0"},
      {true, true, true, true, ""},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << "tools=" << r.tools << " ns=" << r.ns << " fwd=" << r.fwd);
    FilterVerdict v = DecideFilter(Parts(r.tools, r.ns, r.fwd));
    EXPECT_EQ(v.can_filter, r.can_filter);
    if (r.can_filter) {
      EXPECT_EQ(v.unavailable_reason, "");
    } else {
      EXPECT_THAT(v.unavailable_reason, HasSubstr(r.reason));
    }
  }
}

HostFacts Facts(bool confines, bool tools, bool can_filter) {
  HostFacts f;
  f.uid = 1654;
  f.confines = confines;
  f.bwrap_path = confines ? "/usr/bin/bwrap" : "";
  f.confine_error = confines ? "" : "bubblewrap not found";
  f.filter = Parts(tools, can_filter, can_filter);
  f.verdict = DecideFilter(f.filter);
  return f;
}

// HostFiltersAllowlist: CanFilter where bubblewrap confines, tools alone where it does not.
TEST(HostFiltersAllowlistTest, PostureTable) {
  for (bool confines : {false, true}) {
    for (bool tools : {false, true}) {
      for (bool can : {false, true}) {
        HostFacts f = Facts(confines, tools, can);
        bool expected = confines ? f.can_filter() : tools;
        SCOPED_TRACE(PostureLine(f));
        EXPECT_EQ(HostFiltersAllowlist(f), expected);
      }
    }
  }
  EXPECT_TRUE(HostFiltersAllowlist(Facts(true, true, true)));
  EXPECT_FALSE(HostFiltersAllowlist(Facts(true, true, false)));
  EXPECT_TRUE(HostFiltersAllowlist(Facts(false, true, false)));
  EXPECT_FALSE(HostFiltersAllowlist(Facts(false, false, false)));
}

TEST(PostureLineTest, ConfiningHostThatCannotFilter) {
  HostFacts f = Facts(true, true, false);
  f.limits.hierarchy = CgroupHierarchy::kV1;
  EXPECT_EQ(PostureLine(f),
            "posture uid=1654 confines=yes bwrap=/usr/bin/bwrap tools=yes canFilter=no "
            "filterUnavailable=\"cannot create a network namespace: Operation not permitted\" "
            "allowlist=severed view=default identity=worker-uid limits=v1 seccomp=yes");
}

TEST(PostureLineTest, ConfiningHostThatFilters) {
  HostFacts f = Facts(true, true, true);
  f.uid = 0;
  f.identity = "per-run";
  f.run_uids = "600000-665535";
  f.limits.unavailable_reason = "the cgroup root /x does not exist";
  EXPECT_EQ(PostureLine(f),
            "posture uid=0 confines=yes bwrap=/usr/bin/bwrap tools=yes canFilter=yes "
            "allowlist=filtered view=default identity=per-run runUids=600000-665535 limits=none "
            "limitsUnavailable=\"the cgroup root /x does not exist\" seccomp=yes");
}

// The host that cannot build the syscall filter says so on the line, and refuses every run.
TEST(PostureLineTest, SeccompUnavailableSaysWhyAndRefuses) {
  HostFacts f = Facts(true, true, true);
  EXPECT_EQ(SeccompRefusal(f), "");
  f.seccomp_error = "the kernel takes no seccomp filters";
  EXPECT_THAT(PostureLine(f),
              HasSubstr(" seccomp=no seccompError=\"the kernel takes no seccomp filters\""));
  EXPECT_THAT(SeccompRefusal(f), HasSubstr("the kernel takes no seccomp filters"));
}

TEST(PostureLineTest, UnconfinedSaysWhyAndWhatHappensToAllowlists) {
  EXPECT_THAT(PostureLine(Facts(false, true, false)),
              HasSubstr("confines=no bwrap=none confineError=\"bubblewrap not found\""));
  EXPECT_THAT(PostureLine(Facts(false, true, false)), HasSubstr("allowlist=filtered-or-aborted"));
  EXPECT_THAT(PostureLine(Facts(false, false, false)), HasSubstr("allowlist=refused"));
  // No bubblewrap, no view: the command sees the host (docs/view.md).
  EXPECT_THAT(PostureLine(Facts(false, true, false)), HasSubstr(" view=host"));
}

TEST(PostureLineTest, QuotesAreEscaped) {
  HostFacts f = Facts(true, false, false);
  f.filter.tools_error = "odd \"name\"\nnext";
  f.verdict = DecideFilter(f.filter);
  EXPECT_THAT(PostureLine(f), HasSubstr("filterUnavailable=\"odd \\\"name\\\" next\""));
}

TEST(ConfinementRefusalTest, OnlyWhenRequiredAndUnconfined) {
  for (bool confines : {false, true}) {
    for (bool required : {false, true}) {
      HostFacts f = Facts(confines, true, true);
      f.require_confinement = required;
      if (required && !confines) {
        EXPECT_THAT(ConfinementRefusal(f), HasSubstr("CODESPACE_REQUIRE_CONFINEMENT=1"));
        EXPECT_THAT(ConfinementRefusal(f), HasSubstr("bubblewrap not found"));
      } else {
        EXPECT_EQ(ConfinementRefusal(f), "");
      }
    }
  }
}

TEST(ConfinementRefusalTest, ARootWorkerWhoseRunUidsCannotBeUsedRefuses) {
  HostFacts f = Facts(true, true, true);
  f.identity = "per-run";
  f.run_uids = "1000-2000";
  EXPECT_EQ(ConfinementRefusal(f), "");
  f.identity_error = "CODESPACE_RUN_UIDS=1000-2000 overlaps the user \"alice\" (id 1000)";
  EXPECT_THAT(ConfinementRefusal(f), HasSubstr("overlaps the user \"alice\""));
  EXPECT_THAT(PostureLine(f), HasSubstr("identity=per-run runUids=1000-2000 identityError="));
}

}  // namespace
}  // namespace codespace
