#include "supervisor/run_dir.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

#include "base/file_util.h"
#include "base/process.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(RunDirTest, StatusRoundTripsAndIsAbsentUntilWritten) {
  TempDir state;
  RunDir dir = RunDirFor(state.path(), "0123456789abcdef");
  EXPECT_EQ(dir.path, state.path() + "/runs/0123456789abcdef");
  ASSERT_OK(MakeDirs(dir.path));
  EXPECT_THAT(ReadRunStatus(dir), StatusIs(StatusCode::kNotFound));
  RunStatus st;
  st.outcome = RunOutcome::Signaled(15);
  st.outcome.reason = "why";
  st.outcome.output_error = "stdout capture: disk full";
  st.outcome.network_report.dns_refused = {"denied.test"};
  st.outcome.network_report.dropped_packets = 7;
  st.stdout_log = {12, "ab", true};
  st.stderr_log = {0, "cd", true};
  st.supervisor_peak_rss_kb = 4096;
  st.setup_ms = 37;
  st.ended_ms = 1700000000000;
  ASSERT_OK(WriteRunStatus(dir, st));
  auto back = ReadRunStatus(dir);
  ASSERT_OK(back);
  EXPECT_EQ(back->outcome.kind, RunOutcome::Kind::kSignaled);
  EXPECT_EQ(back->outcome.signal, 15);
  EXPECT_EQ(back->outcome.reason, "why");
  EXPECT_EQ(back->outcome.output_error, "stdout capture: disk full");
  EXPECT_EQ(back->outcome.network_report, st.outcome.network_report);
  EXPECT_EQ(back->stdout_log, st.stdout_log);
  EXPECT_EQ(back->stderr_log, st.stderr_log);
  EXPECT_EQ(back->supervisor_peak_rss_kb, 4096u);
  EXPECT_EQ(back->setup_ms, 37);
  EXPECT_EQ(back->ended_ms, 1700000000000);
  ASSERT_OK(WriteFileAtomically(dir.status_path(), "{torn"));
  EXPECT_FALSE(ReadRunStatus(dir).ok());
}

TEST(RunDirTest, SetupTimeIsAbsentWhenTheCommandNeverStarted) {
  TempDir state;
  RunDir dir = RunDirFor(state.path(), "0123456789abcdef");
  ASSERT_OK(MakeDirs(dir.path));
  RunStatus st;
  st.outcome = RunOutcome::Aborted("Filtered-egress netns setup failed: veth: EPERM");
  ASSERT_OK(WriteRunStatus(dir, st));
  auto text = ReadFileToString(dir.status_path());
  ASSERT_OK(text);
  EXPECT_THAT(*text, Not(HasSubstr("setup_ms")));
  auto back = ReadRunStatus(dir);
  ASSERT_OK(back);
  EXPECT_EQ(back->setup_ms, std::nullopt);
  // Zero is a measurement (setup under a millisecond), not an absence.
  st.setup_ms = 0;
  ASSERT_OK(WriteRunStatus(dir, st));
  EXPECT_THAT(ReadFileToString(dir.status_path()).value_or(""), HasSubstr("\"setup_ms\": 0"));
  EXPECT_EQ(ReadRunStatus(dir)->setup_ms, 0);
}

TEST(RunDirTest, IdentityTellsALiveProcessFromAReusedPid) {
  TempDir state;
  auto me = IdentityOf(::getpid());
  ASSERT_OK(me);
  EXPECT_TRUE(IsAlive(*me));
  ProcessIdentity other = *me;
  other.start_time += 1;  // same pid, another process
  EXPECT_FALSE(IsAlive(other));
  std::string path = state.path() + "/supervisor";
  ASSERT_OK(WriteIdentity(path, *me));
  EXPECT_EQ(*ReadIdentity(path), *me);

  SpawnOptions o;
  o.argv = {"/bin/true"};
  auto child = Spawn(o);
  ASSERT_OK(child);
  auto id = IdentityOf(child->pid());
  ASSERT_OK(child->Wait());
  ASSERT_OK(id);
  EXPECT_FALSE(IsAlive(*id)) << "a reaped process is not alive";
}

// Forks a process that takes `dir`'s supervisor lock and then, when `with_child`, forks a child
// of its own that keeps every descriptor (as a fork does before exec) and writes its pid; then
// both wait to be killed. Returns the holder and that child (-1 without one).
std::pair<pid_t, pid_t> ForkLockHolder(const RunDir& dir, bool with_child) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return {-1, -1};
  pid_t holder = ::fork();
  if (holder == 0) {
    auto lock = TakeSupervisorLock(dir);
    pid_t kid = -1;
    if (lock.ok() && with_child && (kid = ::fork()) == 0) {
      for (;;) ::pause();
    }
    (void)!::write(ready[1], &kid, sizeof(kid));
    for (;;) ::pause();
  }
  ::close(ready[1]);
  pid_t kid = -1;
  if (::read(ready[0], &kid, sizeof(kid)) != sizeof(kid)) kid = -2;
  ::close(ready[0]);
  return {holder, kid};
}

void KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

TEST(RunDirTest, SupervisorLockIsHeldWhileItsHolderLivesAndFreeOnceItDies) {
  TempDir state;
  RunDir dir = RunDirFor(state.path(), "0123456789abcdef");
  ASSERT_OK(MakeDirs(dir.path, 0750));
  EXPECT_FALSE(SupervisorLockHeld(dir)) << "no lock file yet";
  auto [holder, none] = ForkLockHolder(dir, false);
  ASSERT_GT(holder, 0);
  ASSERT_EQ(none, -1);
  EXPECT_TRUE(SupervisorLockHeld(dir));
  EXPECT_THAT(TakeSupervisorLock(dir), StatusIs(StatusCode::kAlreadyExists));
  KillAndReap(holder);
  EXPECT_FALSE(SupervisorLockHeld(dir));
  EXPECT_OK(TakeSupervisorLock(dir));
}

// A supervisor killed while the child it forked for bubblewrap had not yet exec'd: the child's
// copy of the descriptor must not keep the run looking alive (nobody would record it lost).
TEST(RunDirTest, SupervisorLockIsNotKeptByAChildOfItsDeadHolder) {
  TempDir state;
  RunDir dir = RunDirFor(state.path(), "0123456789abcdef");
  ASSERT_OK(MakeDirs(dir.path, 0750));
  auto [holder, kid] = ForkLockHolder(dir, true);
  ASSERT_GT(holder, 0);
  ASSERT_GT(kid, 0);
  EXPECT_TRUE(SupervisorLockHeld(dir));
  KillAndReap(holder);
  ASSERT_EQ(::kill(kid, 0), 0) << "the child is alive, its descriptor open";
  EXPECT_FALSE(SupervisorLockHeld(dir));
  EXPECT_OK(TakeSupervisorLock(dir));
  ::kill(kid, SIGKILL);  // reparented away: pid 1 (or a subreaper) reaps it
}

}  // namespace
}  // namespace codespace
