// LocalProcessRunner: admission into records — queued for a worker, running at once for the
// foreground `run`, refused with the reason either way — in a real SQLite store.
#include "worker/local_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "store/sqlite_run_store.h"

namespace codespace {
namespace {

HostFacts Confining() {
  HostFacts f;
  f.confines = true;
  f.bwrap_path = "/usr/bin/bwrap";
  f.filter.tools = f.filter.namespace_ok = f.filter.forwarding = true;
  f.verdict = DecideFilter(f.filter);
  return f;
}

HostFacts NothingToEnforceWith() {
  HostFacts f;
  f.confine_error = "bubblewrap (bwrap) not found on PATH";
  f.filter.tools_error = "ip not found on PATH (install iproute2)";
  f.filter.namespace_ok = f.filter.forwarding = true;
  f.verdict = DecideFilter(f.filter);
  return f;
}

RunSpec Severed() {
  RunSpec s;
  s.argv = {"true"};
  s.workspace = "/tmp";
  s.egress.mode = SandboxEgressPolicy::kNone;
  return s;
}

class LocalRunnerTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = SqliteRunStore::Open(dir_.path() + "/codespace.db");
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(*s);
  }
  TempDir dir_;
  std::unique_ptr<SqliteRunStore> store_;
};
class LocalRunnerTest : public LocalRunnerTestBase {};

TEST_F(LocalRunnerTest, CreateQueuesAndCreateRunningRecordsItRunningFromTheStart) {
  LocalProcessRunner runner(Confining(), store_.get());
  auto queued = runner.Create(Severed());
  ASSERT_OK(queued.status());
  EXPECT_EQ(queued->state, RunState::kQueued);
  EXPECT_EQ(queued->started_ms, 0);
  auto running = runner.CreateRunning(Severed());
  ASSERT_OK(running.status());
  EXPECT_EQ(running->state, RunState::kRunning);
  EXPECT_EQ(running->started_ms, running->created_ms);
  EXPECT_EQ(running->plan, Plan::kSevered);
  for (const RunRecord* r : {&*queued, &*running}) {
    auto stored = store_->Get(r->id);
    ASSERT_OK(stored.status());
    EXPECT_EQ(stored->state, r->state);
    EXPECT_EQ(stored->started_ms, r->started_ms);
  }
}

TEST_F(LocalRunnerTest, RefusedIsRefusedWhicheverWayItWasAskedFor) {
  LocalProcessRunner runner(NothingToEnforceWith(), store_.get());
  for (bool start_now : {false, true}) {
    auto r = start_now ? runner.CreateRunning(Severed()) : runner.Create(Severed());
    ASSERT_OK(r.status());
    EXPECT_EQ(r->state, RunState::kRefused) << start_now;
    EXPECT_EQ(r->started_ms, 0);
    EXPECT_THAT(r->reason, ::testing::HasSubstr("not found on PATH"));
    EXPECT_EQ(store_->Get(r->id)->state, RunState::kRefused);
  }
}

}  // namespace
}  // namespace codespace

namespace codespace {
namespace {

class IdempotentCreateTest : public LocalRunnerTestBase {};

TEST_F(IdempotentCreateTest, OneRunPerKeyAndTheRetryGetsTheFirst) {
  LocalProcessRunner runner(Confining(), store_.get());
  bool replayed = true;
  auto first = runner.Create(Severed(), {"named", "key-1"}, &replayed);
  ASSERT_OK(first);
  EXPECT_FALSE(replayed);
  EXPECT_EQ(first->idempotency_key, "key-1");
  EXPECT_EQ(first->name, "named");
  auto again = runner.Create(Severed(), {"named", "key-1"}, &replayed);
  ASSERT_OK(again);
  EXPECT_TRUE(replayed);
  EXPECT_EQ(again->id, first->id);
  RunListOptions all;
  auto runs = store_->List(all);
  ASSERT_OK(runs);
  EXPECT_EQ(runs->size(), 1u) << "the same key never creates a second run";
  // Another key (or none) is another run.
  ASSERT_OK(runner.Create(Severed(), {"", "key-2"}));
  ASSERT_OK(runner.Create(Severed()));
  ASSERT_OK(runner.Create(Severed()));
  runs = store_->List(all);
  ASSERT_OK(runs);
  EXPECT_EQ(runs->size(), 4u);
}

TEST_F(IdempotentCreateTest, TheSameKeyWithAnotherSpecIsRefused) {
  LocalProcessRunner runner(Confining(), store_.get());
  ASSERT_OK(runner.Create(Severed(), {"", "k"}));
  RunSpec other = Severed();
  other.argv = {"false"};
  auto r = runner.Create(other, {"", "k"});
  EXPECT_THAT(r, testing::StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(r, testing::StatusHasMessage("a key names one submission"));
}

TEST_F(IdempotentCreateTest, BadNamesAndKeysAreRefusedBeforeAnythingIsRecorded) {
  LocalProcessRunner runner(Confining(), store_.get());
  EXPECT_THAT(runner.Create(Severed(), {"latest", ""}),
              testing::StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(runner.Create(Severed(), {"", "a key"}),
              testing::StatusIs(StatusCode::kInvalidArgument));
  auto runs = store_->List(RunListOptions{});
  ASSERT_OK(runs);
  EXPECT_TRUE(runs->empty());
}

}  // namespace
}  // namespace codespace
