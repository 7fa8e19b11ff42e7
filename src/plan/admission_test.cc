#include "plan/admission.h"

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

RunSpec Spec(SandboxEgressPolicy mode) {
  RunSpec s;
  s.argv = {"true"};
  s.workspace = "/tmp";
  s.egress.mode = mode;
  if (mode == SandboxEgressPolicy::kAllowlist) {
    AllowlistEntry e;
    e.kind = AllowlistEntry::Kind::kHostName;
    e.host = "allowed.test";
    s.egress.allowlist.push_back(e);
  }
  return s;
}

TEST(NamespaceNameTest, PureFunctionOfRunId) {
  EXPECT_EQ(NamespaceNameForRun("0123456789abcdef"), "cs-0123456789ab");
  EXPECT_EQ(NamespaceNameForRun("0123456789abcdef"), NamespaceNameForRun("0123456789abcdef"));
  EXPECT_NE(NamespaceNameForRun("0123456789abcdef"), NamespaceNameForRun("1123456789abcdef"));
  // Not hex: hashed, still "cs-" + 12 hex digits, still stable.
  std::string odd = NamespaceNameForRun("Run/With Odd Chars");
  EXPECT_EQ(odd.size(), 15u);
  EXPECT_EQ(odd.rfind("cs-", 0), 0u);
  EXPECT_EQ(odd, NamespaceNameForRun("Run/With Odd Chars"));
}

// Admission follows the plan table; it predicts the namespace exactly for Filtered plans.
TEST(AdmitTest, FollowsThePlanAndPredictsTheNamespace) {
  for (bool confines : {false, true}) {
    for (bool tools : {false, true}) {
      for (bool can : {false, true}) {
        HostFacts f = Facts(confines, tools, can);
        for (auto mode : {SandboxEgressPolicy::kNone, SandboxEgressPolicy::kAllowlist,
                          SandboxEgressPolicy::kOpen}) {
          SCOPED_TRACE(PostureLine(f) + " egress=" + std::string(EgressPolicyName(mode)));
          Admission a = Admit(f, Spec(mode), "00112233445566aa");
          PlanDecision d = DecidePlan(f, mode);
          EXPECT_EQ(a.decision, d);
          EXPECT_EQ(a.admitted, d.plan != Plan::kRefused);
          EXPECT_EQ(a.reason, d.reason);
          EXPECT_EQ(a.namespace_name, d.plan == Plan::kFiltered ? "cs-001122334455" : "");
        }
      }
    }
  }
}

// The guard the seed is about: admission reads HostFiltersAllowlist, the same fact the launch
// reads. On a confining host with the tools but no CanFilter, an allowlist run is admitted
// severed (not Filtered, which would abort at setup).
TEST(AdmitTest, ConfiningHostWithToolsButNoCanFilterSevers) {
  Admission a = Admit(Facts(true, true, false), Spec(SandboxEgressPolicy::kAllowlist), "0011223344556677");
  EXPECT_TRUE(a.admitted);
  EXPECT_EQ(a.decision.plan, Plan::kSevered);
  EXPECT_EQ(a.namespace_name, "");
  EXPECT_EQ(a.reason, "cannot create a network namespace: EPERM");
}

TEST(AdmitTest, UnconfinedWithToolsPredictsNamespace) {
  Admission a = Admit(Facts(false, true, false), Spec(SandboxEgressPolicy::kAllowlist), "0011223344556677");
  EXPECT_TRUE(a.admitted);
  EXPECT_EQ(a.decision.plan, Plan::kFiltered);
  EXPECT_EQ(a.namespace_name, "cs-001122334455");
}

TEST(AdmitTest, RefusesUnrunnableSpecs) {
  HostFacts f = Facts(true, true, true);
  RunSpec no_cmd = Spec(SandboxEgressPolicy::kNone);
  no_cmd.argv.clear();
  EXPECT_FALSE(Admit(f, no_cmd, "0011223344556677").admitted);
  EXPECT_THAT(Admit(f, no_cmd, "0011223344556677").reason, HasSubstr("no command"));

  RunSpec rel = Spec(SandboxEgressPolicy::kNone);
  rel.workspace = "work";
  Admission a = Admit(f, rel, "0011223344556677");
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.decision.plan, Plan::kRefused);
  EXPECT_THAT(a.reason, HasSubstr("absolute path"));

  for (const char* bad : {"/", "/proc", "/proc/1", "/sys/fs", "/dev", "/dev/shm"}) {
    RunSpec s = Spec(SandboxEgressPolicy::kNone);
    s.workspace = bad;
    EXPECT_FALSE(Admit(f, s, "0011223344556677").admitted) << bad;
  }
  for (const char* fine : {"/tmp", "/device", "/home/u/proc", "/procfs"}) {
    RunSpec s = Spec(SandboxEgressPolicy::kNone);
    s.workspace = fine;
    EXPECT_TRUE(Admit(f, s, "0011223344556677").admitted) << fine;
  }

  RunSpec empty_allow = Spec(SandboxEgressPolicy::kAllowlist);
  empty_allow.egress.allowlist.clear();
  EXPECT_FALSE(Admit(f, empty_allow, "0011223344556677").admitted);
}

TEST(AdmitTest, RequireConfinementRefusesEverythingOnAnUnconfinedHost) {
  HostFacts f = Facts(false, true, true);
  f.require_confinement = true;
  for (auto mode : {SandboxEgressPolicy::kNone, SandboxEgressPolicy::kAllowlist,
                    SandboxEgressPolicy::kOpen}) {
    Admission a = Admit(f, Spec(mode), "0011223344556677");
    EXPECT_FALSE(a.admitted);
    EXPECT_THAT(a.reason, HasSubstr("CODESPACE_REQUIRE_CONFINEMENT"));
  }
  f.confines = true;
  EXPECT_TRUE(Admit(f, Spec(SandboxEgressPolicy::kNone), "0011223344556677").admitted);
}

}  // namespace
}  // namespace codespace

namespace codespace {
namespace {

// Fail closed: a host that cannot build the syscall filter launches nothing, confined or not.
TEST(AdmitTest, NoSyscallFilterRefusesEveryRun) {
  for (bool confines : {true, false}) {
    HostFacts f = Facts(confines, true, true);
    f.seccomp_error = "the seccomp filter does not compile on this host: x";
    for (auto mode : {SandboxEgressPolicy::kNone, SandboxEgressPolicy::kAllowlist,
                      SandboxEgressPolicy::kOpen}) {
      Admission a = Admit(f, Spec(mode), "0011223344556677");
      EXPECT_FALSE(a.admitted);
      EXPECT_EQ(a.decision.plan, Plan::kRefused);
      EXPECT_THAT(a.reason, HasSubstr("without its syscall filter"));
    }
  }
}

}  // namespace
}  // namespace codespace
