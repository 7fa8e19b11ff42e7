#include "store/run_record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "base/testing/status_matchers.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;

constexpr RunState kAllStates[] = {RunState::kQueued,  RunState::kRunning, RunState::kExited,
                                   RunState::kAborted, RunState::kRefused, RunState::kCancelled,
                                   RunState::kLost};

TEST(RunStateTest, NamesRoundTrip) {
  const std::pair<RunState, std::string_view> kNames[] = {
      {RunState::kQueued, "queued"},   {RunState::kRunning, "running"},
      {RunState::kExited, "exited"},   {RunState::kAborted, "aborted"},
      {RunState::kRefused, "refused"}, {RunState::kCancelled, "cancelled"},
      {RunState::kLost, "lost"},
  };
  for (const auto& [state, name] : kNames) {
    EXPECT_EQ(RunStateName(state), name);
    Result<RunState> parsed = ParseRunState(name);
    ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, state);
  }
}

TEST(RunStateTest, ParseRejectsUnknownText) {
  for (std::string_view text : {"", "Queued", "RUNNING", "done", "queued ", "exit"}) {
    EXPECT_THAT(ParseRunState(text), StatusIs(StatusCode::kInvalidArgument)) << text;
  }
  EXPECT_THAT(ParseRunState("done"), StatusHasMessage("unknown run state \"done\""));
}

TEST(RunStateTest, OnlyQueuedAndRunningAreNotTerminal) {
  for (RunState state : kAllStates) {
    bool live = state == RunState::kQueued || state == RunState::kRunning;
    EXPECT_EQ(IsTerminal(state), !live) << RunStateName(state);
  }
}

// Every (from, to) pair: exactly the header's table is allowed.
TEST(RunStateTest, TransitionTable) {
  const std::set<std::pair<RunState, RunState>> kAllowed = {
      {RunState::kQueued, RunState::kRunning},    {RunState::kQueued, RunState::kAborted},
      {RunState::kQueued, RunState::kRefused},    {RunState::kQueued, RunState::kCancelled},
      {RunState::kRunning, RunState::kExited},    {RunState::kRunning, RunState::kAborted},
      {RunState::kRunning, RunState::kCancelled}, {RunState::kRunning, RunState::kLost},
  };
  int checked = 0;
  for (RunState from : kAllStates) {
    for (RunState to : kAllStates) {
      EXPECT_EQ(IsAllowedTransition(from, to), kAllowed.contains({from, to}))
          << RunStateName(from) << " -> " << RunStateName(to);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 49);
}

TEST(RunStateTest, TerminalStatesNeverChangeAndNothingStaysPut) {
  for (RunState from : kAllStates) {
    EXPECT_FALSE(IsAllowedTransition(from, from)) << RunStateName(from);
    if (!IsTerminal(from)) continue;
    for (RunState to : kAllStates) {
      EXPECT_FALSE(IsAllowedTransition(from, to))
          << RunStateName(from) << " -> " << RunStateName(to);
    }
  }
}

TEST(RunStateTest, NothingGoesBackToQueued) {
  for (RunState from : kAllStates) EXPECT_FALSE(IsAllowedTransition(from, RunState::kQueued));
}

// One mapping of how a run ended to the status `codespace run` passes on: a record filled from an
// outcome passes on what the outcome would have.
TEST(RecordShellCodeTest, ARecordPassesOnItsOutcomesCode) {
  RunOutcome timed_out{RunOutcome::Kind::kTimedOut, 0, 15, "timeout", {}, ""};
  RunOutcome cancelled{RunOutcome::Kind::kCancelled, 0, 9, "cancelled", {}, ""};
  RunOutcome not_found{RunOutcome::Kind::kNotFound, 0, 0, "not found", {}, ""};
  RunOutcome cannot{RunOutcome::Kind::kCannotInvoke, 0, 0, "cannot", {}, ""};
  for (const RunOutcome& o :
       {RunOutcome::Exited(0), RunOutcome::Exited(3), RunOutcome::Signaled(9),
        RunOutcome::Aborted("setup"), timed_out, cancelled, not_found, cannot}) {
    RunRecord r;
    r.state = RunState::kRunning;
    ApplyOutcome(o, &r);
    EXPECT_EQ(RecordShellCode(r), o.ShellCode()) << static_cast<int>(o.kind);
  }
  RunRecord refused;
  refused.state = RunState::kRefused;
  EXPECT_EQ(RecordShellCode(refused), kExitCodespaceFailed);
  RunRecord lost;
  lost.state = RunState::kLost;
  EXPECT_EQ(RecordShellCode(lost), kExitCodespaceFailed);
}

}  // namespace
}  // namespace codespace
