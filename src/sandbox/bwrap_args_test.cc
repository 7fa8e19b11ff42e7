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
  l.view.whole_host = true;  // the host view: today's `--ro-bind / /`
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
                  "--die-with-parent", "--new-session", "--uid", "1000", "--gid", "1000",
                  "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                  "--tmpfs", "/var/tmp", "--ro-bind", "/opt/cs/codespace-init",
                  "/dev/.codespace-init", "--bind", "/work/ws", "/work/ws", "--chdir", "/work/ws",
                  "--tmpfs", "/var/lib/codespace", "--remount-ro", "/var/lib/codespace",
                  "--clearenv", "--setenv", "A", "1", "--setenv", "B", "x=y", "--cap-drop", "ALL",
                  "--", "/dev/.codespace-init", "3", "sh", "-c", "echo hi"));
}

// A root worker's run: the workspace is bound from its idmapped mount (identity/), onto the
// workspace's own path, which stays the working directory.
TEST(BwrapArgsTest, WorkspaceSourceIsBoundOntoTheWorkspace) {
  BwrapLayout l = Layout(false);
  l.workspace_source = "/run/codespace/ws/600000/workspace";
  auto a = BuildBwrapArgv(l);
  auto bind = std::find(a.begin(), a.end(), "--bind");
  ASSERT_NE(bind, a.end());
  EXPECT_EQ(*(bind + 1), "/run/codespace/ws/600000/workspace");
  EXPECT_EQ(*(bind + 2), "/work/ws");
  EXPECT_EQ(*(bind + 3), "--chdir");
  EXPECT_EQ(*(bind + 4), "/work/ws");
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

// The default view on a merged-/usr host, whole: the system read-only, /etc with a secret
// masked and the synthetic identity files, /proc/sys read-only, private /tmp, /var/tmp, /run and
// HOME, the workspace, the spec's bind and hide, and the root refusing writes last. The state dir
// is not in this view, so there is nothing to hide.
TEST(BwrapArgsTest, DefaultViewArgvExactly) {
  BwrapLayout l = Layout(false);
  HostLayout host;
  host.paths["/usr"].kind = HostPath::Kind::kDirectory;
  host.paths["/etc"].kind = HostPath::Kind::kDirectory;
  host.paths["/lib"] = {HostPath::Kind::kSymlink, "usr/lib", "/usr/lib",
                        HostPath::Kind::kDirectory};
  host.paths["/etc/shadow"].kind = HostPath::Kind::kFile;
  host.paths["/proc/sys"].kind = HostPath::Kind::kDirectory;
  host.paths["/opt/secret"].kind = HostPath::Kind::kDirectory;
  FsView v;
  v.binds = {{"/opt", "/opt", true}};
  v.hides = {"/opt/secret"};
  l.view = BuildMountPlan(v, host);
  EXPECT_THAT(
      BuildBwrapArgv(l),
      ElementsAre("/usr/bin/bwrap", "--unshare-user", "--disable-userns", "--unshare-pid",
                  "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net",
                  "--die-with-parent", "--new-session", "--uid", "1000", "--gid", "1000",
                  "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--ro-bind", "/etc",
                  "/etc", "--ro-bind", "/dev/null", "/etc/shadow", "--perms", "0644",
                  "--ro-bind-data", "10", "/etc/passwd", "--perms", "0644", "--ro-bind-data", "11",
                  "/etc/group", "--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys",
                  "/proc/sys", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run",
                  "--perms", "0700", "--tmpfs", "/home/user", "--ro-bind", "/opt/cs/codespace-init",
                  "/dev/.codespace-init", "--bind", "/work/ws", "/work/ws", "--chdir", "/work/ws",
                  "--ro-bind", "/opt", "/opt", "--tmpfs", "/opt/secret", "--remount-ro",
                  "/opt/secret", "--remount-ro", "/", "--clearenv", "--setenv", "A", "1",
                  "--setenv", "B", "x=y", "--cap-drop", "ALL", "--", "/dev/.codespace-init", "3",
                  "sh", "-c", "echo hi"));
}

// The state dir is hidden where the view shows it: the host view, a workspace that holds it, a
// bind of a directory that holds it; in the default view elsewhere it is simply not there.
TEST(BwrapArgsTest, TheStateDirIsHiddenWhereTheViewShowsIt) {
  auto hides = [](const BwrapLayout& l) {
    auto a = BuildBwrapArgv(l);
    return std::find(a.begin(), a.end(), "/var/lib/codespace") != a.end();
  };
  BwrapLayout l = Layout(false);
  EXPECT_TRUE(hides(l));
  l.view = BuildMountPlan(FsView{}, HostLayout{});
  EXPECT_FALSE(hides(l));
  l.workspace = "/var/lib";
  EXPECT_TRUE(hides(l));
  l.workspace = "/work/ws";
  FsView v;
  v.binds = {{"/var", "/var", true}};
  l.view = BuildMountPlan(v, HostLayout{});
  EXPECT_TRUE(hides(l));
}

// A spec bind that holds the workspace goes before the workspace's bind (or the workspace would
// vanish under it); the others after. --remount-ro / is the last mount in the default view.
TEST(BwrapArgsTest, SpecMountsAroundTheWorkspace) {
  BwrapLayout l = Layout(false);
  FsView v;
  v.binds = {{"/srv/proj", "/work", true}, {"/srv/tools", "/tools", true}};
  l.view = BuildMountPlan(v, HostLayout{});
  auto a = BuildBwrapArgv(l);
  auto at = [&](const std::string& x) { return std::find(a.begin(), a.end(), x) - a.begin(); };
  EXPECT_LT(at("/srv/proj"), at("--bind"));
  EXPECT_GT(at("/srv/tools"), at("--bind"));
  auto root_ro = std::find(a.begin(), a.end(), "--clearenv") - 2;
  EXPECT_EQ(*root_ro, "--remount-ro");
  EXPECT_EQ(*(root_ro + 1), "/");
}

// A workspace under the private /tmp, or under a directory the default view does not show
// (a home): bound after the tmpfs mounts, before the root turns read-only, and its bind is the
// only thing of /home the run sees besides its own HOME.
TEST(BwrapArgsTest, AWorkspaceUnderTmpOrAHiddenDirectory) {
  for (const char* ws : {"/tmp/job/ws", "/home/alice/proj", "/var/lib/ci/ws"}) {
    BwrapLayout l = Layout(false);
    l.workspace = ws;
    l.view = BuildMountPlan(FsView{}, HostLayout{});
    auto a = BuildBwrapArgv(l);
    auto at = [&](const std::string& x) { return std::find(a.begin(), a.end(), x) - a.begin(); };
    EXPECT_LT(at("/tmp"), at("--bind")) << ws;
    EXPECT_LT(at("/home/user"), at("--bind")) << ws;
    EXPECT_EQ(a[at("--bind") + 1], ws);
    EXPECT_LT(at("--bind"), std::find(a.begin(), a.end(), "--clearenv") - a.begin() - 2) << ws;
    EXPECT_THAT(a, Not(Contains("/home"))) << ws;
    EXPECT_THAT(a, Not(Contains("/var/lib"))) << ws;
  }
}

// A layout that names no view sees nothing: no root bind, no system directory (fail closed: the
// command cannot even be found, rather than seeing the host).
TEST(BwrapArgsTest, NoViewShowsNothing) {
  BwrapLayout l = Layout(false);
  l.view = MountPlan{};
  auto a = BuildBwrapArgv(l);
  auto ro = std::find(a.begin(), a.end(), "--ro-bind");
  ASSERT_NE(ro, a.end());
  EXPECT_NE(*(ro + 1), "/");
  EXPECT_THAT(a, Not(Contains("/usr")));
}

TEST(SandboxEnvironmentTest, HomeUnlessTheRunSetsIt) {
  EXPECT_THAT(SandboxEnvironment({"A=1"}, "/home/user"),
              ElementsAre("A=1", std::string("PATH=") + kDefaultSandboxPath, "HOME=/home/user"));
  EXPECT_THAT(SandboxEnvironment({"HOME=/w", "PATH=/x"}, "/home/user"),
              ElementsAre("HOME=/w", "PATH=/x"));
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

namespace codespace {
namespace {

// Limits (issue 15): sized tmpfs for /tmp and /var/tmp before any bind, the cgroup namespace
// required and the cgroup file systems masked once the run has a cgroup.
TEST(BwrapArgsTest, LimitsSizeTheTmpfsAndRequireTheCgroupNamespace) {
  BwrapLayout l;
  l.bwrap_path = "/usr/bin/bwrap";
  l.workspace = "/tmp/ws";
  l.command = {"true"};
  std::vector<std::string> plain = BuildBwrapArgv(l);
  EXPECT_NE(std::find(plain.begin(), plain.end(), "--unshare-cgroup-try"), plain.end());
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "--size"), plain.end());
  l.tmp_bytes = 8 << 20;
  l.in_cgroup = true;
  std::vector<std::string> a = BuildBwrapArgv(l);
  EXPECT_NE(std::find(a.begin(), a.end(), "--unshare-cgroup"), a.end());
  EXPECT_EQ(std::find(a.begin(), a.end(), "--unshare-cgroup-try"), a.end());
  auto at = [&](const std::vector<std::string>& seq) {
    return std::search(a.begin(), a.end(), seq.begin(), seq.end()) - a.begin();
  };
  auto tmp = at({"--size", "8388608", "--tmpfs", "/tmp"});
  auto var_tmp = at({"--size", "8388608", "--tmpfs", "/var/tmp"});
  auto bind = at({"--bind", "/tmp/ws", "/tmp/ws"});
  const std::vector<std::string> mask_flags = {"--tmpfs", "/sys/fs/cgroup", "--remount-ro",
                                               "/sys/fs/cgroup"};
  const auto end = static_cast<long>(a.size());
  // A view without /sys (the default view) has no cgroup file system to mask; the host view
  // has, and masks it.
  EXPECT_EQ(at(mask_flags), end);
  l.view.whole_host = true;
  std::vector<std::string> host = BuildBwrapArgv(l);
  EXPECT_NE(std::search(host.begin(), host.end(), mask_flags.begin(), mask_flags.end()),
            host.end());
  EXPECT_LT(tmp, end);
  EXPECT_LT(var_tmp, end);
  EXPECT_LT(tmp, bind);  // the workspace under /tmp is still bound over the sized tmpfs
  EXPECT_LT(var_tmp, bind);
}

}  // namespace
}  // namespace codespace
