// Unconfined lane: uid 1654 with CODESPACE_BWRAP_PATH pointing at no binary. Nothing would
// enforce a severance by bubblewrap, so the plan table decides on the tools alone: an allowlist
// run is filtered by our own namespace or aborted at setup — never launched on the worker's
// network — and without the tools it is refused.
#include <unistd.h>

#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::map<std::string, std::string> kNoBwrap = {
    {"CODESPACE_BWRAP_PATH", "/nonexistent/bwrap"}};

class UnconfinedLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
    ASSERT_TRUE(service_.ok());
  }
  std::map<std::string, std::string> Env(std::map<std::string, std::string> more = {}) {
    more.insert(kNoBwrap.begin(), kNoBwrap.end());
    return more;
  }
  CliResult Run(const std::vector<std::string>& flags, const std::vector<std::string>& cmd,
                const std::map<std::string, std::string>& env) {
    std::vector<std::string> a = {"run", "--workspace", install_.workspace()};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return RunCodespace(install_, a, env);
  }
  std::string Created() const { return install_.workspace() + "/command-ran"; }

  StagedInstall install_{kUnprivilegedUid};
  LoopbackListener service_;
};

TEST_F(UnconfinedLaneTest, PostureSaysItDoesNotConfine) {
  CliResult r = RunCodespace(install_, {"posture"}, Env());
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("confines=no bwrap=none"));
  EXPECT_THAT(r.output, HasSubstr("CODESPACE_BWRAP_PATH=/nonexistent/bwrap"));
  EXPECT_THAT(r.output, HasSubstr("tools=yes"));
  EXPECT_THAT(r.output, HasSubstr("allowlist=filtered-or-aborted"));
}

TEST_F(UnconfinedLaneTest, PlanPredictsTheNamespace) {
  CliResult r = RunCodespace(install_, {"plan", "--egress", "allowlist", "--allow", "203.0.113.7"},
                             Env());
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("plan: filtered"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("namespace: cs-[0-9a-f]{12} \\(for run "));
}

TEST_F(UnconfinedLaneTest, AllowlistRunIsAbortedAtSetupAndNeverStarts) {
  CliResult r = Run({"--egress", "allowlist", "--allow", "127.0.0.1"},
                    {"/bin/touch", Created()}, Env());
  EXPECT_EQ(r.code(), 125) << Describe(r);
  EXPECT_NE(::access(Created().c_str(), F_OK), 0) << "the command ran";
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "aborted") << rec.dump();
  EXPECT_EQ(rec["plan"], "filtered");
  EXPECT_THAT(rec["namespace"].get<std::string>(), ::testing::StartsWith("cs-"));
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("Filtered-egress netns setup failed"));
  EXPECT_TRUE(rec["setup_ms"].is_null()) << "setup never finished: " << rec.dump();
}

TEST_F(UnconfinedLaneTest, NoneIsSeveredByANamespaceOfItsOwn) {
  CliResult links = Run({"-q"}, {install_.probe(), "links"}, Env());
  EXPECT_EQ(links.code(), 0) << Describe(links);
  EXPECT_THAT(links.output, HasSubstr("lo"));
  EXPECT_THAT(links.output, Not(HasSubstr("eth")));
  CliResult r = Run({"-q"}, {install_.probe(), "no-connect", "127.0.0.1",
                             std::to_string(service_.port())},
                    Env());
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_EQ(LatestRecord(install_)["network"], "severed");
}

TEST_F(UnconfinedLaneTest, WithoutToolsEverythingButOpenIsRefused) {
  auto env = Env({{"PATH", "/nonexistent"}});
  for (const char* egress : {"none", "allowlist"}) {
    std::vector<std::string> flags = {"--egress", egress};
    if (std::string(egress) == "allowlist") {
      flags.push_back("--allow");
      flags.push_back("127.0.0.1");
    }
    CliResult r = Run(flags, {"/bin/touch", Created()}, env);
    EXPECT_EQ(r.code(), 125) << Describe(r);
    EXPECT_NE(::access(Created().c_str(), F_OK), 0) << "refused command ran (" << egress << ")";
    auto rec = LatestRecord(install_);
    EXPECT_EQ(rec["state"], "refused") << rec.dump();
    EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("not found on PATH"));
  }
  CliResult open = Run({"--egress", "open"}, {"/bin/touch", Created()}, env);
  EXPECT_EQ(open.code(), 0) << Describe(open);
  EXPECT_EQ(LatestRecord(install_)["network"], "shared");
}

TEST_F(UnconfinedLaneTest, RequireConfinementRefusesToLaunch) {
  auto env = Env({{"CODESPACE_REQUIRE_CONFINEMENT", "1"}});
  CliResult r = Run({"--egress", "none"}, {"/bin/touch", Created()}, env);
  EXPECT_EQ(r.code(), 125) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("CODESPACE_REQUIRE_CONFINEMENT=1 but bubblewrap does not "
                                  "confine on this host"));
  EXPECT_NE(::access(Created().c_str(), F_OK), 0);
  CliResult posture = RunCodespace(install_, {"posture"}, env);
  EXPECT_EQ(posture.code(), 125);
  EXPECT_THAT(posture.output, HasSubstr("requireConfinement=yes"));
}

}  // namespace
}  // namespace codespace::lanes
