#include "supervisor/run_dir.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace codespace
