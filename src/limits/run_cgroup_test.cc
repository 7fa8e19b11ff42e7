#include "limits/run_cgroup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/file_util.h"
#include "base/process.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"

namespace codespace {
namespace {

using ::testing::HasSubstr;

void Put(const std::string& path, const std::string& text) {
  ASSERT_OK(MakeDirs(path.substr(0, path.rfind('/'))));
  ASSERT_OK(WriteFileAtomically(path, text));
}
std::string Get(const std::string& path) {
  auto t = ReadFileToString(path);
  return t.ok() ? *t : "<" + t.status().message() + ">";
}

// --- A directory tree standing in for cgroupfs --------------------------------------------

TEST(DetectCgroupLayout, ARootThatDoesNotExistIsLimitsNone) {
  CgroupLayout l = DetectCgroupLayout("/nonexistent/cgroup-root");
  EXPECT_EQ(l.hierarchy, CgroupHierarchy::kNone);
  EXPECT_THAT(l.reason, HasSubstr("/nonexistent/cgroup-root does not exist"));
}

TEST(DetectCgroupLayout, V1UnderThisProcesssOwnCgroupInEachController) {
  TempDir t;
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"})
    Put(t.path() + "/" + c + "/cgroup.procs", "");
  MakeDirs(t.path() + "/memory/job/42").IgnoreError();
  Put(t.path() + "/self",
      "9:name=systemd:/\n8:pids:/\n4:memory:/job/42\n2:cpuacct:/\n1:cpu:/\n0::/\n");
  CgroupLayout l = DetectCgroupLayout(t.path(), t.path() + "/self");
  ASSERT_EQ(l.hierarchy, CgroupHierarchy::kV1) << l.reason;
  EXPECT_EQ(l.parents["memory"], t.path() + "/memory/job/42");
  EXPECT_EQ(l.parents["pids"], t.path() + "/pids");
  EXPECT_EQ(l.parents["cpuacct"], t.path() + "/cpuacct");
}

TEST(DetectCgroupLayout, V1MissingAControllerIsNoneNamingIt) {
  TempDir t;
  for (const char* c : {"memory", "cpu", "cpuacct"}) Put(t.path() + "/" + c + "/cgroup.procs", "");
  Put(t.path() + "/self", "4:memory:/\n2:cpuacct:/\n1:cpu:/\n");
  CgroupLayout l = DetectCgroupLayout(t.path(), t.path() + "/self");
  EXPECT_EQ(l.hierarchy, CgroupHierarchy::kNone);
  EXPECT_THAT(l.reason, HasSubstr("pids"));
}

TEST(DetectCgroupLayout, V2NeedsTheControllersInTheDelegatedSubtree) {
  TempDir t;
  Put(t.path() + "/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
  Put(t.path() + "/system.slice/codespace.service/cgroup.controllers", "cpu memory pids\n");
  Put(t.path() + "/self", "0::/system.slice/codespace.service\n");
  CgroupLayout l = DetectCgroupLayout(t.path(), t.path() + "/self");
  ASSERT_EQ(l.hierarchy, CgroupHierarchy::kV2) << l.reason;
  EXPECT_EQ(l.parents[""], t.path() + "/system.slice/codespace.service");

  Put(t.path() + "/system.slice/codespace.service/cgroup.controllers", "memory\n");
  l = DetectCgroupLayout(t.path(), t.path() + "/self");
  EXPECT_EQ(l.hierarchy, CgroupHierarchy::kNone);
  EXPECT_THAT(l.reason, HasSubstr("does not offer pids, cpu"));
}

TEST(RunCgroup, V2WritesTheLimitsIntoCodespaceRunId) {
  TempDir t;
  Put(t.path() + "/cgroup.controllers", "cpu memory pids\n");
  Put(t.path() + "/worker/cgroup.controllers", "cpu memory pids\n");
  Put(t.path() + "/self", "0::/worker\n");
  CgroupLayout layout = DetectCgroupLayout(t.path(), t.path() + "/self");
  ASSERT_EQ(layout.hierarchy, CgroupHierarchy::kV2) << layout.reason;
  auto cg = RunCgroup::Create(layout, "0123456789abcdef", RunLimits{256ull << 20, 32, 500, 0, 0});
  ASSERT_OK(cg);
  const std::string dir = t.path() + "/worker/codespace/0123456789abcdef";
  EXPECT_EQ((*cg)->dirs(), std::vector<std::string>{dir});
  EXPECT_EQ(Get(t.path() + "/worker/cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ(Get(t.path() + "/worker/codespace/cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ(Get(dir + "/memory.max"), "268435456");
  EXPECT_EQ(Get(dir + "/pids.max"), "32");
  EXPECT_EQ(Get(dir + "/cpu.max"), "50000 100000");
  // memory.swap.max is optional (a kernel without swap has none): not created.
  EXPECT_NE(::access((dir + "/memory.swap.max").c_str(), F_OK), 0);
  EXPECT_EQ((*cg)->procs_fds().size(), 1u);
  // Usage as the kernel would leave it.
  Put(dir + "/memory.peak", "1000\n");
  Put(dir + "/cpu.stat", "usage_usec 30\nuser_usec 20\nsystem_usec 10\n");
  Put(dir + "/memory.events", "oom 0\noom_kill 0\n");
  RunUsage u = (*cg)->ReadUsage();
  EXPECT_EQ(u.peak_memory_bytes, 1000u);
  EXPECT_EQ(u.cpu_user_usec, 20u);
  EXPECT_EQ(u.oom_kills, 0u);
}

TEST(RunCgroup, V1WritesEachControllerAndLeavesOutWhatIsNotAsked) {
  TempDir t;
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"})
    Put(t.path() + "/" + c + "/cgroup.procs", "");
  Put(t.path() + "/self", "8:pids:/\n4:memory:/\n2:cpuacct:/\n1:cpu:/\n");
  CgroupLayout layout = DetectCgroupLayout(t.path(), t.path() + "/self");
  ASSERT_EQ(layout.hierarchy, CgroupHierarchy::kV1) << layout.reason;
  auto cg = RunCgroup::Create(layout, "feedfacefeedface", RunLimits{1ull << 30, 0, 0, 0, 0});
  ASSERT_OK(cg);
  EXPECT_EQ((*cg)->dirs().size(), 4u);
  EXPECT_EQ(Get(t.path() + "/memory/codespace/feedfacefeedface/memory.limit_in_bytes"),
            "1073741824");
  EXPECT_NE(::access((t.path() + "/pids/codespace/feedfacefeedface/pids.max").c_str(), F_OK), 0);
  EXPECT_EQ((*cg)->procs_fds().size(), 4u);
}

TEST(MakeRunCgroup, NoHierarchyRefusesALimitAndAllowsNone) {
  auto none = MakeRunCgroup("/nonexistent/cgroup-root", "0123456789abcdef", RunLimits{});
  ASSERT_OK(none);
  EXPECT_EQ(*none, nullptr);
  auto refused =
      MakeRunCgroup("/nonexistent/cgroup-root", "0123456789abcdef", RunLimits{1 << 30, 0, 0, 0, 0});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("does not exist"));
}

// --- The real hierarchy (v1 here; v2 where the machine has it) ------------------------------

class RealCgroup : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to make cgroups";
    layout_ = DetectCgroupLayout("/sys/fs/cgroup");
    if (layout_.hierarchy == CgroupHierarchy::kNone) GTEST_SKIP() << layout_.reason;
    id_ = fmt::format("test{:012x}", static_cast<unsigned>(::getpid()));
    for (const auto& [c, parent] : layout_.parents) {
      if (::access((parent + "/codespace").c_str(), F_OK) != 0)
        made_.push_back(parent + "/codespace");
    }
  }
  // codespace/ directories this test made, once empty (a concurrent run's keeps its parent).
  void TearDown() override {
    for (const auto& dir : made_) ::rmdir(dir.c_str());
  }
  std::vector<std::string> made_;
  CgroupLayout layout_;
  std::string id_;
};

TEST_F(RealCgroup, WritesTheLimitsHoldsTheChildAndRemovesItself) {
  auto cg = RunCgroup::Create(layout_, id_, RunLimits{64ull << 20, 8, 500, 0, 0});
  ASSERT_OK(cg);
  std::vector<std::string> dirs = (*cg)->dirs();
  if (layout_.hierarchy == CgroupHierarchy::kV1) {
    std::string mem = RunCgroupDir(layout_.parents["memory"], id_);
    EXPECT_EQ(Get(mem + "/memory.limit_in_bytes"), "67108864\n");
    EXPECT_EQ(Get(RunCgroupDir(layout_.parents["pids"], id_) + "/pids.max"), "8\n");
    EXPECT_EQ(Get(RunCgroupDir(layout_.parents["cpu"], id_) + "/cpu.cfs_quota_us"), "50000\n");
  } else {
    EXPECT_EQ(Get(dirs[0] + "/memory.max"), "67108864\n");
    EXPECT_EQ(Get(dirs[0] + "/pids.max"), "8\n");
  }
  SpawnOptions o;
  o.argv = {"/bin/sleep", "60"};
  o.cgroup_procs_fds = (*cg)->procs_fds();
  auto child = Spawn(o);
  ASSERT_OK(child);
  for (const std::string& d : dirs) {
    EXPECT_THAT(Get(d + "/cgroup.procs"), HasSubstr(std::to_string(child->pid()))) << d;
  }
  // The sleeper is left in it: KillAndRemove kills it and removes every directory.
  ASSERT_OK((*cg)->KillAndRemove());
  auto st = child->Wait();
  ASSERT_OK(st);
  EXPECT_TRUE(st->signaled);
  EXPECT_EQ(st->signal, SIGKILL);
  for (const std::string& d : dirs) EXPECT_NE(::access(d.c_str(), F_OK), 0) << d;
}

TEST_F(RealCgroup, APidsLimitHoldsForTheFirstFork) {
  auto cg = RunCgroup::Create(layout_, id_, RunLimits{0, 1, 0, 0, 0});
  ASSERT_OK(cg);
  auto pipe = MakePipe();
  ASSERT_OK(pipe);
  SpawnOptions o;
  // The shell is the cgroup's one process: its first fork fails.
  o.argv = {"/bin/sh", "-c", "/bin/true && echo forked"};
  o.fds = {{pipe->write.get(), 1}, {pipe->write.get(), 2}};
  o.cgroup_procs_fds = (*cg)->procs_fds();
  auto child = Spawn(o);
  ASSERT_OK(child);
  pipe->write.reset();
  auto out = ReadAll(pipe->read.get());
  ASSERT_OK(out);
  ASSERT_OK(child->Wait());
  EXPECT_THAT(*out, ::testing::Not(HasSubstr("forked")));
  EXPECT_THAT(*out, HasSubstr("Cannot fork"));  // dash
  EXPECT_OK((*cg)->KillAndRemove());
}

// Join before exec, seen without a race: the child joins a FROZEN freezer cgroup. Joined
// before exec, it freezes there still running this test's binary; joined after exec (the
// parent writing the pid once Spawn has returned), the program would already be running.
TEST(SpawnJoinsCgroup, BeforeExecSoTheProgramsFirstInstructionIsInside) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a cgroup";
  std::string self = Get("/proc/self/cgroup");
  std::string freezer_root = "/sys/fs/cgroup/freezer";
  if (::access((freezer_root + "/cgroup.procs").c_str(), F_OK) != 0) {
    GTEST_SKIP() << "no v1 freezer at " << freezer_root;
  }
  const std::string dir = fmt::format("{}/codespace-join-test-{}", freezer_root, ::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << ErrnoText(errno);
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      WriteFileAtomically(dir + "/freezer.state", "THAWED").IgnoreError();
      KillAndRemoveCgroupDir(dir).IgnoreError();
    }
  } cleanup{dir};
  {
    int fd = ::open((dir + "/freezer.state").c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "FROZEN", 6), 6);
    ::close(fd);
  }
  auto procs = OpenFile((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_OK(procs);
  std::optional<Result<ChildProcess>> spawned;
  std::thread spawner([&] {
    SpawnOptions o;
    o.argv = {"/bin/true"};
    o.cgroup_procs_fds = {procs->get()};
    spawned.emplace(Spawn(o));
  });
  pid_t frozen = -1;
  for (int i = 0; i < 5000 && frozen < 0; ++i) {
    std::string listed = Get(dir + "/cgroup.procs");
    if (!listed.empty() && listed[0] != '<') frozen = std::atoi(listed.c_str());
    if (frozen < 0) ::usleep(1000);
  }
  std::string exe;
  if (frozen > 0) {
    char buf[4096];
    ssize_t n = ::readlink(fmt::format("/proc/{}/exe", frozen).c_str(), buf, sizeof(buf) - 1);
    if (n > 0) exe.assign(buf, static_cast<size_t>(n));
  }
  {
    int fd = ::open((dir + "/freezer.state").c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "THAWED", 6), 6);
    ::close(fd);
  }
  spawner.join();
  ASSERT_GT(frozen, 0) << "the child never appeared in the frozen cgroup";
  char me[4096];
  ssize_t n = ::readlink("/proc/self/exe", me, sizeof(me) - 1);
  ASSERT_GT(n, 0);
  EXPECT_EQ(exe, std::string(me, static_cast<size_t>(n)))
      << "the child was frozen in its cgroup only after it had exec'd " << exe;
  ASSERT_TRUE(spawned && spawned->ok());
  auto st = (*spawned)->Wait();
  ASSERT_OK(st);
  EXPECT_TRUE(st->success());
}

TEST_F(RealCgroup, SweepRemovesAFinishedRunsCgroupAndWhatIsInIt) {
  auto cg = RunCgroup::Create(layout_, id_, RunLimits{});
  ASSERT_OK(cg);
  SpawnOptions o;
  o.argv = {"/bin/sleep", "60"};
  o.cgroup_procs_fds = (*cg)->procs_fds();
  auto child = Spawn(o);
  ASSERT_OK(child);
  std::vector<std::string> dirs = (*cg)->dirs();
  // A crash: the owner is gone, its directories are not. (Leaking the object keeps its
  // destructor from removing them; its open cgroup.procs descriptors do not keep rmdir out.)
  RunCgroup* leaked = cg->release();
  (void)leaked;
  std::vector<std::string> errors;
  // A run the store does not know as finished is left alone.
  auto untouched = SweepRunCgroups(
      layout_, [](const std::string&) { return false; }, &errors);
  for (const auto& d : untouched) EXPECT_THAT(d, ::testing::Not(HasSubstr(id_)));
  auto removed = SweepRunCgroups(
      layout_, [&](const std::string& id) { return id == id_; }, &errors);
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(removed.size(), dirs.size());
  for (const std::string& d : dirs) EXPECT_NE(::access(d.c_str(), F_OK), 0) << d;
  auto st = child->Wait();
  ASSERT_OK(st);
  EXPECT_EQ(st->signal, SIGKILL);
}

}  // namespace
}  // namespace codespace
