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

class LocalRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = SqliteRunStore::Open(dir_.path() + "/codespace.db");
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(*s);
  }
  TempDir dir_;
  std::unique_ptr<SqliteRunStore> store_;
};

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
