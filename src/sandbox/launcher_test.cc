#include "sandbox/launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/process.h"
#include "base/unique_fd.h"

namespace codespace {
namespace {

bool Exits(const ChildProcess& c) {
  pollfd p{c.pidfd(), POLLIN, 0};
  return ::poll(&p, 1, 5000) == 1;
}

// Still running a while later: a SIGKILL sent has landed by then (a killed sleep dies at once).
bool StillRunning(const ChildProcess& c) {
  pollfd p{c.pidfd(), POLLIN, 0};
  return ::poll(&p, 1, 300) == 0;
}

ChildProcess SleepWithEnv(const std::string& entry) {
  SpawnOptions o;
  o.argv = {"/bin/sleep", "300"};
  o.env = std::vector<std::string>{entry};
  auto c = Spawn(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : ChildProcess();
}

// Only a process whose environment holds exactly kBwrapRunEnv=<that run> is killed: not another
// run's, not a longer id, not a variable whose name merely ends the same.
TEST(KillStrayBubblewrapsTest, KillsOnlyTheNamedRunsBubblewraps) {
  const std::string var = kBwrapRunEnv;
  ChildProcess mine = SleepWithEnv(var + "=0123456789abcdef");
  ChildProcess other = SleepWithEnv(var + "=fedcba9876543210");
  ChildProcess longer = SleepWithEnv(var + "=0123456789abcdef0");
  ChildProcess suffix = SleepWithEnv("X_" + var + "=0123456789abcdef");
  KillStrayBubblewraps("0123456789abcdef");
  EXPECT_TRUE(Exits(mine));
  EXPECT_TRUE(StillRunning(other));
  EXPECT_TRUE(StillRunning(longer));
  EXPECT_TRUE(StillRunning(suffix));
}

TEST(KillStrayBubblewrapsTest, AnEmptyRunIdKillsNothing) {
  ChildProcess empty = SleepWithEnv(std::string(kBwrapRunEnv) + "=");
  KillStrayBubblewraps("");
  EXPECT_TRUE(StillRunning(empty));
}

}  // namespace
}  // namespace codespace
