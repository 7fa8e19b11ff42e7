// An unconfined run has no pid namespace to die with: at its wall-clock timeout the worker must
// find and kill the run's whole tree itself — background and double-forked descendants included,
// which were reparented to the worker (it is their subreaper) when their parents died. The
// confined case is RootLaneTest.TimeoutKillsTheWholeSandbox.
#include <signal.h>

#include <chrono>
#include <random>

#include <fmt/format.h>

#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

class UnconfinedTimeoutLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
  }
  void TearDown() override {
    // A failing run leaves its sleeps behind: they are this test's, found by its unique marker.
    if (!marker_.empty()) {
      KillProcessesMatching(marker_);
    }
  }

  StagedInstall install_{kUnprivilegedUid};
  std::string marker_;
};

TEST_F(UnconfinedTimeoutLaneTest, TimeoutKillsTheWholeTreeWithoutAPidNamespace) {
  // A unique sleep, short enough to end by itself should everything else fail: a survivor
  // cannot hang the lane or outlive it by more than 20 s.
  std::random_device rd;
  marker_ = fmt::format("20.{:09d}", rd() % 1000000000u);
  // No sleep holds the run's output open: what must end them is the kill at the timeout, not
  // the wait for the last writer (which would find them by their open output).
  const auto started = std::chrono::steady_clock::now();
  CliResult r = RunCodespace(
      install_,
      {"run", "--workspace", install_.workspace(), "--egress", "open", "--timeout", "1", "--",
       "/bin/sh", "-c",
       fmt::format("exec >/dev/null 2>&1; sleep {0} & (sleep {0} &) ; sleep {0}", marker_)},
      {{"CODESPACE_BWRAP_PATH", "/nonexistent/bwrap"}});
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_THAT(r.output, HasSubstr("confines=no")) << Describe(r);
  // Killed at the timeout, or the command returns only when the survivors end by themselves (a
  // survivor holding any fd of the run keeps `codespace run` waiting): either way, not in time.
  EXPECT_LT(took, std::chrono::seconds(12))
      << "`codespace run --timeout 1` returned after "
      << std::chrono::duration_cast<std::chrono::seconds>(took).count()
      << "s: a process of the run outlived its timeout";
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "cancelled") << rec.dump();
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("timeout"));
  EXPECT_THAT(ProcessesMatching(marker_), IsEmpty())
      << "a process of the unconfined run survived its timeout: " << Describe(r);
}

}  // namespace
}  // namespace codespace::lanes
