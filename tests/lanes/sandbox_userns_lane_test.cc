// A sandboxed command cannot build a user namespace of its own (bubblewrap's --disable-userns):
// one would give it a fresh set of capabilities over namespaces it creates, the first step of
// most unprivileged kernel escapes. Probed from inside a run of the real binary, as root and as
// uid 1654; the same command outside the sandbox succeeds, so the wall is what stops it.
#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

class SandboxUserNamespaceTest : public ::testing::TestWithParam<uid_t> {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    install_ = std::make_unique<StagedInstall>(GetParam());
    ASSERT_TRUE(install_->ok()) << install_->error();
  }
  std::unique_ptr<StagedInstall> install_;
};

const std::vector<std::string> kNestedUserns = {"/usr/bin/unshare", "--user", "/bin/true"};

TEST_P(SandboxUserNamespaceTest, CommandCannotBuildAUserNamespace) {
  // Positive control, outside any sandbox, as the same uid.
  std::vector<std::string> outside = {"/usr/bin/setpriv",
                                      "--reuid=" + std::to_string(GetParam()),
                                      "--regid=" + std::to_string(GetParam()), "--clear-groups",
                                      "--"};
  outside.insert(outside.end(), kNestedUserns.begin(), kNestedUserns.end());
  auto control = RunCommand(outside);
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  ASSERT_TRUE(control->status.success())
      << "this host refuses user namespaces outside the sandbox too: " << control->output;

  for (const char* egress : {"none", "open"}) {
    std::vector<std::string> args = {"run", "-q", "--workspace", install_->workspace(),
                                     "--egress", egress, "--"};
    args.insert(args.end(), kNestedUserns.begin(), kNestedUserns.end());
    CliResult r = RunCodespace(*install_, args);
    EXPECT_NE(r.code(), 0) << "a sandboxed command built a user namespace (" << egress
                           << "): " << Describe(r);
    EXPECT_NE(r.code(), 125) << "the run did not start at all (" << egress << "): " << Describe(r);
  }
}

INSTANTIATE_TEST_SUITE_P(Lanes, SandboxUserNamespaceTest, ::testing::Values(0u, kUnprivilegedUid),
                         [](const auto& param_info) {
                           return param_info.param == 0 ? std::string("Root")
                                                        : std::string("Uid1654");
                         });

}  // namespace
}  // namespace codespace::lanes
