#include "sandbox/bwrap_args.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace codespace {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;

BwrapLayout Layout(bool share) {
  BwrapLayout l;
  l.bwrap_path = "/usr/bin/bwrap";
  l.share_network = share;
  l.workspace = "/work/ws";
  l.hidden_dirs = {"/var/lib/codespace"};
  l.env = {"A=1", "B=x=y"};
  l.init_path = "/opt/cs/codespace-init";
  l.command = {"/dev/.codespace-init", "3", "sh", "-c", "echo hi"};
  return l;
}

// The whole argv, pinned: every confining flag is here on purpose (see bwrap_args.h).
TEST(BwrapArgsTest, SeveredArgvExactly) {
  EXPECT_THAT(
      BuildBwrapArgv(Layout(false)),
      ElementsAre("/usr/bin/bwrap", "--unshare-user", "--disable-userns", "--unshare-pid",
                  "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net",
                  "--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--dev", "/dev",
                  "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--ro-bind",
                  "/opt/cs/codespace-init", "/dev/.codespace-init", "--bind", "/work/ws",
                  "/work/ws", "--chdir", "/work/ws", "--tmpfs", "/var/lib/codespace",
                  "--remount-ro", "/var/lib/codespace", "--clearenv", "--setenv", "A", "1", "--setenv", "B", "x=y",
                  "--cap-drop", "ALL", "--", "/dev/.codespace-init", "3", "sh",
                  "-c", "echo hi"));
}

// The run's syscall filter: bubblewrap loads it from the descriptor just before the command.
TEST(BwrapArgsTest, SeccompFdIsTheLastFlagBeforeTheCommand) {
  BwrapLayout l = Layout(false);
  auto without = BuildBwrapArgv(l);
  EXPECT_THAT(without, Not(Contains("--seccomp")));
  l.seccomp_fd = 4;
  auto with = BuildBwrapArgv(l);
  auto dashdash = std::find(with.begin(), with.end(), "--");
  ASSERT_GE(dashdash - with.begin(), 2);
  EXPECT_EQ(*(dashdash - 2), "--seccomp");
  EXPECT_EQ(*(dashdash - 1), "4");
  with.erase(dashdash - 2, dashdash);
  EXPECT_EQ(with, without);
}

TEST(BwrapArgsTest, SharedDiffersOnlyInTheNetworkNamespace) {
  auto severed = BuildBwrapArgv(Layout(false));
  auto shared = BuildBwrapArgv(Layout(true));
  EXPECT_THAT(shared, Not(Contains("--unshare-net")));
  severed.erase(std::find(severed.begin(), severed.end(), "--unshare-net"));
  EXPECT_EQ(severed, shared);
}

// Confinement that must hold for every layout: user+pid namespaces, no capabilities, cleared
// environment, read-only root, and the command only after "--".
TEST(BwrapArgsTest, InvariantsForEveryLayout) {
  for (bool share : {false, true}) {
    for (bool with_ws : {false, true}) {
      BwrapLayout l = Layout(share);
      if (!with_ws) l.workspace.clear();
      auto a = BuildBwrapArgv(l);
      auto dashdash = std::find(a.begin(), a.end(), "--");
      ASSERT_NE(dashdash, a.end());
      std::vector<std::string> flags(a.begin(), dashdash);
      for (const char* f : {"--unshare-user", "--disable-userns", "--unshare-pid", "--clearenv",
                            "--die-with-parent", "--new-session"}) {
        EXPECT_THAT(flags, Contains(f)) << f;
      }
      auto cap = std::find(flags.begin(), flags.end(), "--cap-drop");
      ASSERT_NE(cap, flags.end());
      EXPECT_EQ(*(cap + 1), "ALL");
      auto ro = std::find(flags.begin(), flags.end(), "--ro-bind");
      EXPECT_EQ(*(ro + 1), "/");
      EXPECT_THAT(flags, Not(Contains("--bind-try")));
      EXPECT_THAT(flags, Not(Contains("--dev-bind")));
      // The workspace bind comes after the /tmp tmpfs, or a workspace under /tmp would vanish.
      // Hidden dirs are masked after the workspace bind, or one inside the workspace would show.
      auto hidden = std::find(flags.begin(), flags.end(), "/var/lib/codespace");
      auto chdir = std::find(flags.begin(), flags.end(), "--chdir");
      EXPECT_GT(hidden - flags.begin(), chdir - flags.begin());
      if (with_ws) {
        auto tmp = std::find(flags.begin(), flags.end(), "/tmp");
        auto bind = std::find(flags.begin(), flags.end(), "--bind");
        EXPECT_LT(tmp - flags.begin(), bind - flags.begin());
      }
    }
  }
}

// A hidden dir that holds the workspace is masked before the workspace is bound (else the bind
// would vanish under the tmpfs); one inside the workspace, after (else it would show).
TEST(BwrapArgsTest, HiddenDirsAroundTheWorkspace) {
  BwrapLayout l = Layout(false);
  l.workspace = "/srv/state/ws";
  l.hidden_dirs = {"/srv/state", "/srv/state/ws/.secrets", "/srv/statefile"};
  auto a = BuildBwrapArgv(l);
  auto at = [&](const std::string& v) { return std::find(a.begin(), a.end(), v) - a.begin(); };
  EXPECT_LT(at("/srv/state"), at("--bind"));
  EXPECT_GT(at("/srv/state/ws/.secrets"), at("--bind"));
  EXPECT_GT(at("/srv/statefile"), at("--bind"));  // a sibling, not a parent
}

TEST(BwrapArgsTest, MalformedEnvEntriesAreDropped) {
  BwrapLayout l = Layout(false);
  l.env = {"GOOD=1", "NOEQUALS", "=novalue"};
  auto a = BuildBwrapArgv(l);
  EXPECT_EQ(std::count(a.begin(), a.end(), "--setenv"), 1);
}

TEST(BwrapArgsTest, TrialSandboxConfinesLikeASeveredRun) {
  auto a = TrialSandboxArgv("/usr/bin/bwrap");
  EXPECT_THAT(a, Contains("--unshare-user"));
  EXPECT_THAT(a, Contains("--unshare-net"));
  EXPECT_THAT(a, Contains("--disable-userns"));
  EXPECT_EQ(a.back(), "/bin/true");
}

TEST(SandboxEnvironmentTest, AddsPathOnlyWhenMissing) {
  EXPECT_THAT(SandboxEnvironment({"A=1"}),
              ElementsAre("A=1", std::string("PATH=") + kDefaultSandboxPath));
  EXPECT_THAT(SandboxEnvironment({"PATH=/x"}), ElementsAre("PATH=/x"));
}

}  // namespace
}  // namespace codespace
