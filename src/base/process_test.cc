#include "base/process.h"

#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdint>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ProcessTest, RunCommandCapturesOutputAndExitCode) {
  auto out = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_OK(out);
  EXPECT_EQ(out->status, ExitStatus::Exited(3));
  EXPECT_THAT(out->output, HasSubstr("out\n"));
  EXPECT_THAT(out->output, HasSubstr("err\n"));
}

TEST(ProcessTest, SignalDeathIsReported) {
  auto out = RunCommand({"/bin/sh", "-c", "kill -TERM $$"});
  ASSERT_OK(out);
  EXPECT_EQ(out->status, ExitStatus::Killed(SIGTERM));
  EXPECT_EQ(out->status.ShellCode(), 128 + SIGTERM);
}

TEST(ProcessTest, MissingProgramIsNotFoundAndNothingRuns) {
  EXPECT_THAT(RunCommand({"/nonexistent/prog"}), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(RunCommand({"no-such-program-anywhere"}),
              StatusHasMessage("execve(no-such-program-anywhere)"));
}

TEST(ProcessTest, NonExecutableIsPermissionDenied) {
  EXPECT_THAT(RunCommand({"/etc/passwd"}), StatusIs(StatusCode::kPermissionDenied));
}

TEST(ProcessTest, EnvironmentIsExactlyWhatWasGiven) {
  ::setenv("CODESPACE_TEST_LEAK", "1", 1);
  auto out = RunCommand({"/usr/bin/env"}, std::vector<std::string>{"ONLY=this"});
  ASSERT_OK(out);
  EXPECT_EQ(out->output, "ONLY=this\n");
}

// A descriptor the caller left open without close-on-exec does not reach the child; mapped
// ones do.
TEST(ProcessTest, OnlyMappedDescriptorsReachTheChild) {
  int leaked = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC, on purpose
  ASSERT_GE(leaked, 3);
  auto pipe = MakePipe();
  ASSERT_OK(pipe);
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "ls /proc/self/fd >&7"};
  o.fds = {{pipe->write.get(), 7}};
  auto child = Spawn(o);
  ::close(leaked);
  ASSERT_OK(child);
  pipe->write.reset();
  std::string fds = *ReadAll(pipe->read.get());
  ASSERT_OK(child->Wait());
  // ls itself opens one descriptor for the directory: 0, 1, 2, 7 and that one (3).
  EXPECT_EQ(fds, "0\n1\n2\n3\n7\n") << "leaked fd was " << leaked;
}

TEST(ProcessTest, WaitForTimesOutThenSignalKills) {
  SpawnOptions o;
  o.argv = {"/bin/sleep", "30"};
  auto child = Spawn(o);
  ASSERT_OK(child);
  auto first = child->WaitFor(std::chrono::milliseconds(50));
  ASSERT_OK(first);
  EXPECT_FALSE(first->has_value());
  ASSERT_OK(child->Signal(SIGKILL));
  auto st = child->Wait();
  ASSERT_OK(st);
  EXPECT_EQ(*st, ExitStatus::Killed(SIGKILL));
  // Reaped: signalling again is a no-op, never a stray signal to a reused pid.
  EXPECT_OK(child->Signal(SIGKILL));
  EXPECT_FALSE(child->running());
}

TEST(ProcessTest, FdMappingAndCwd) {
  auto pipe = MakePipe();
  ASSERT_OK(pipe);
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "pwd >&5"};
  o.cwd = "/usr";
  o.fds = {{pipe->write.get(), 5}};
  auto child = Spawn(o);
  ASSERT_OK(child);
  pipe->write.reset();
  EXPECT_EQ(*ReadAll(pipe->read.get()), "/usr\n");
  EXPECT_EQ(*child->Wait(), ExitStatus::Exited(0));
}

TEST(ProcessTest, DestructorKillsAndReapsAnUnwaitedChild) {
  pid_t pid;
  {
    SpawnOptions o;
    o.argv = {"/bin/sleep", "30"};
    auto child = Spawn(o);
    ASSERT_OK(child);
    pid = child->pid();
  }
  // Reaped by the destructor: the pid is no longer our child.
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// exec keeps ignored dispositions; the caller's must not reach the program (the supervisor
// ignores SIGPIPE, and a sandboxed `yes | head -1` must end quietly, as anywhere else).
// Also glibc's own 32 and 33, which its sigaction() will not touch (CI's runner ignores them).
TEST(ProcessTest, SignalsTheCallerIgnoresAreDefaultInTheChild) {
  struct RawSigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
  } ign{SIG_IGN, 0, nullptr, 0}, saved[65] = {};
  const int sigs[] = {SIGHUP, SIGPIPE, 32, 33};
  for (int sig : sigs) {
    ASSERT_EQ(::syscall(SYS_rt_sigaction, sig, &ign, &saved[sig], sizeof(uint64_t)), 0) << sig;
  }
  auto r = RunCommand({"/bin/grep", "SigIgn", "/proc/self/status"});
  for (int sig : sigs) ::syscall(SYS_rt_sigaction, sig, &saved[sig], nullptr, sizeof(uint64_t));
  ASSERT_OK(r);
  EXPECT_EQ(r->output, "SigIgn:\t0000000000000000\n");
}

TEST(ProcessTest, ChildrenOfListsTheChildrenBothWays) {
  SpawnOptions o;
  o.argv = {"/bin/sleep", "30"};
  auto a = Spawn(o);
  auto b = Spawn(o);
  ASSERT_OK(a);
  ASSERT_OK(b);
  for (auto kids : {ChildrenOf(::getpid()), ChildrenOfFromStat(::getpid())}) {
    EXPECT_THAT(kids, ::testing::IsSupersetOf({a->pid(), b->pid()}));
  }
  EXPECT_THAT(ChildrenOf(a->pid()), ::testing::IsEmpty());
  EXPECT_THAT(ChildrenOfFromStat(a->pid()), ::testing::IsEmpty());
}

// The shape of bubblewrap while it sets up: a parent whose child waits on it. Killing the parent
// alone would orphan the child; KillWithChildren kills both.
TEST(ProcessTest, KillWithChildrenKillsTheChildItsParentWaitsOn) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "/bin/sleep 300 & wait"};
  auto parent = Spawn(o);
  ASSERT_OK(parent);
  std::vector<pid_t> kids;
  for (int i = 0; i < 500 && kids.empty(); ++i) {
    kids = ChildrenOf(parent->pid());
    if (kids.empty()) ::usleep(10000);
  }
  ASSERT_EQ(kids.size(), 1u);
  UniqueFd grandchild(static_cast<int>(::syscall(SYS_pidfd_open, kids[0], 0)));
  ASSERT_TRUE(grandchild);
  ASSERT_OK(parent->KillWithChildren());
  EXPECT_EQ(*parent->Wait(), ExitStatus::Killed(SIGKILL));
  pollfd gone{grandchild.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&gone, 1, 10000), 1) << "the child outlived its parent";
}

TEST(ProcessTest, KillWithChildrenOfAnExitedChildIsFine) {
  SpawnOptions o;
  o.argv = {"/bin/true"};
  auto child = Spawn(o);
  ASSERT_OK(child);
  pollfd p{child->pidfd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  EXPECT_OK(child->KillWithChildren());
  EXPECT_EQ(*child->Wait(), ExitStatus::Exited(0));
}

TEST(ProcessTest, ParentDeathSignalKillsTheChildWhenItsParentDies) {
  auto pipe = MakePipe();
  ASSERT_OK(pipe);
  pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    SpawnOptions o;
    o.argv = {"/bin/sleep", "300"};
    o.parent_death_signal = SIGKILL;
    auto child = Spawn(o);
    pid_t pid = child.ok() ? child->pid() : -1;
    ssize_t ignored = ::write(pipe->write.get(), &pid, sizeof(pid));
    (void)ignored;
    ::_exit(0);  // no destructors: the child is left to its death signal
  }
  pipe->write.reset();
  pid_t pid = -1;
  ASSERT_EQ(::read(pipe->read.get(), &pid, sizeof(pid)), static_cast<ssize_t>(sizeof(pid)));
  ASSERT_GT(pid, 0);
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  const int open_errno = errno;
  ::waitpid(middle, nullptr, 0);
  if (!pidfd) {
    EXPECT_EQ(open_errno, ESRCH);  // already dead and reaped
    return;
  }
  pollfd gone{pidfd.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&gone, 1, 10000), 1) << "the child outlived its parent";
  ::kill(pid, SIGKILL);
}

}  // namespace
}  // namespace codespace
