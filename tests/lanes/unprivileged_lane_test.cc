// Unprivileged lane: uid 1654, no capabilities, no_new_privs. bubblewrap confines through user
// namespaces, but the worker cannot create a network namespace of its own: an allowlist run is
// severed (NetworkSevered), never aborted and never shared.
#include <dirent.h>

#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class UnprivilegedLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
    ASSERT_TRUE(service_.ok());
  }
  StagedInstall install_{kUnprivilegedUid};
  LoopbackListener service_;
};

TEST_F(UnprivilegedLaneTest, PostureConfinesButCannotFilterBecauseOfTheNamespace) {
  CliResult r = RunCodespace(install_, {"posture"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("posture uid=1654 confines=yes"));
  EXPECT_THAT(r.output, HasSubstr("canFilter=no"));
  // The wall of this lane is the namespace, not forwarding: a staged uid that could build a
  // namespace would not be testing what this lane claims.
  EXPECT_THAT(r.output,
              HasSubstr("filterUnavailable=\"cannot create a network namespace: Operation not "
                        "permitted\""));
  EXPECT_THAT(r.output, HasSubstr("allowlist=severed"));
}

TEST_F(UnprivilegedLaneTest, AllowlistRunIsSeveredAndTheAllowlistedAddressUnreachable) {
  std::string target = "127.0.0.1:" + std::to_string(service_.port());
  CliResult plan = RunCodespace(install_, {"plan", "--egress", "allowlist", "--allow", target});
  EXPECT_EQ(plan.code(), 0) << Describe(plan);
  EXPECT_THAT(plan.output, HasSubstr("plan: severed"));
  EXPECT_THAT(plan.output, HasSubstr("namespace: -"));

  CliResult r = RunCodespace(
      install_, {"run", "--workspace", install_.workspace(), "--egress", "allowlist", "--allow",
                 target, "--", install_.probe(), "no-connect", "127.0.0.1",
                 std::to_string(service_.port())});
  EXPECT_EQ(r.code(), 0) << "the allowlisted address was reachable: " << Describe(r);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_EQ(rec["plan"], "severed");
  EXPECT_EQ(rec["network"], "severed");
  EXPECT_EQ(rec["namespace"], "");
  EXPECT_THAT(rec["reason"].get<std::string>(),
              HasSubstr("cannot create a network namespace: Operation not permitted"));
  // Launched with no namespace of ours.
  std::string prefix = "cs-" + rec["id"].get<std::string>().substr(0, 12);
  if (DIR* d = ::opendir("/run/netns")) {
    while (dirent* e = ::readdir(d)) EXPECT_NE(std::string(e->d_name), prefix);
    ::closedir(d);
  }
}

TEST_F(UnprivilegedLaneTest, NoneIsSeveredAndOpenIsShared) {
  std::string port = std::to_string(service_.port());
  CliResult none = RunCodespace(install_, {"run", "-q", "--workspace", install_.workspace(), "--",
                                           install_.probe(), "links"});
  EXPECT_EQ(none.code(), 0) << Describe(none);
  EXPECT_THAT(none.output, Not(HasSubstr("eth")));
  CliResult open = RunCodespace(install_, {"run", "-q", "--workspace", install_.workspace(),
                                           "--egress", "open", "--", install_.probe(), "connect",
                                           "127.0.0.1", port});
  EXPECT_EQ(open.code(), 0) << Describe(open);
}

}  // namespace
}  // namespace codespace::lanes
