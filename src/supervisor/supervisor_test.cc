// ForkSupervisor's precondition: a fork copies one thread, so a caller with more is refused
// before anything is forked.
#include "supervisor/supervisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <future>
#include <thread>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusIs;

TEST(ForkSupervisorTest, ACallerWithThreadsIsRefusedAndNothingIsForked) {
  TempDir dir;
  SupervisorArgs a;
  a.state_dir = dir.path();
  a.run_id = "0123456789abcdef";
  RunRecord r;
  r.id = a.run_id;
  r.state = RunState::kRunning;
  std::promise<void> release;
  std::thread other([f = release.get_future()]() mutable { f.wait(); });
  auto sup = ForkSupervisor(a, &r);
  release.set_value();
  other.join();
  EXPECT_THAT(sup.status(), StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << "a child was forked";
}

}  // namespace
}  // namespace codespace
