// Remembered probes lane (root): a one-shot `codespace run` plans from the probes an earlier
// command remembered in the state dir, and when the host no longer matches them the run fails
// closed — aborted before its command starts — and the memory is forgotten, so the next command
// probes again and runs.
#include <sys/stat.h>
#include <unistd.h>

#include <regex>

#include "base/file_util.h"
#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class RememberedProbesLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
  }
  CliResult Run(const std::vector<std::string>& cmd) {
    std::vector<std::string> a = {"run",      "--workspace", install_.workspace(),
                                  "--egress", "none",        "--"};
    a.insert(a.end(), cmd.begin(), cmd.end());
    return RunCodespace(install_, a);
  }
  std::string Cache() const { return install_.state_dir() + "/host-probes"; }
  std::string Marker() const { return install_.workspace() + "/command-ran"; }

  StagedInstall install_{0};
};

TEST_F(RememberedProbesLaneTest, StaleConfinementAbortsTheRunAndIsForgotten) {
  CliResult first = Run({"/bin/true"});
  ASSERT_EQ(first.code(), 0) << Describe(first);
  auto text = ReadFileToString(Cache());
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_THAT(*text, HasSubstr("\nconfines 1\n"));

  // The host changed in a way the key does not see: the bubblewrap it remembers now fails.
  std::string broken = install_.root() + "/broken-bwrap";
  ASSERT_TRUE(WriteFileAtomically(broken,
                                  "#!/bin/sh\necho 'bwrap: setting up uid map: "
                                  "Permission denied' >&2\nexit 1\n",
                                  0755)
                  .ok());
  std::string stale = std::regex_replace(*text, std::regex("\nbwrap_path [^\n]*\n"),
                                         "\nbwrap_path " + broken + "\n");
  ASSERT_NE(stale, *text);
  ASSERT_TRUE(WriteFileAtomically(Cache(), stale, 0600).ok());

  CliResult failed = Run({"/bin/touch", Marker()});
  EXPECT_EQ(failed.code(), 125) << Describe(failed);
  EXPECT_NE(::access(Marker().c_str(), F_OK), 0) << "the command ran";
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "aborted") << rec.dump();
  EXPECT_EQ(rec["network"], "severed") << rec.dump();
  EXPECT_NE(::access(Cache().c_str(), F_OK), 0) << "the stale probes were not forgotten";

  // Probed again: the real bubblewrap confines and the command runs.
  CliResult again = Run({"/bin/touch", Marker()});
  EXPECT_EQ(again.code(), 0) << Describe(again);
  EXPECT_EQ(::access(Marker().c_str(), F_OK), 0);
  auto fresh = ReadFileToString(Cache());
  ASSERT_TRUE(fresh.ok());
  EXPECT_THAT(*fresh, Not(HasSubstr(broken)));
}

// The worker probes at its start (SPEC), whatever a one-shot command remembered: its posture
// names the real bubblewrap, not a planted one.
TEST_F(RememberedProbesLaneTest, TheWorkerProbesAfreshAtStart) {
  CliResult first = Run({"/bin/true"});
  ASSERT_EQ(first.code(), 0) << Describe(first);
  auto text = ReadFileToString(Cache());
  ASSERT_TRUE(text.ok());
  const std::string planted = install_.root() + "/planted-bwrap";
  std::string stale = std::regex_replace(*text, std::regex("\nbwrap_path [^\n]*\n"),
                                         "\nbwrap_path " + planted + "\n");
  ASSERT_TRUE(WriteFileAtomically(Cache(), stale, 0600).ok());
  // `timeout` ends the worker (SIGTERM) once it has printed its posture and started serving.
  CliResult worker = RunCodespace(install_, {"worker"}, {}, {"/usr/bin/timeout", "3"});
  EXPECT_THAT(worker.output, HasSubstr("posture uid=0 confines=yes")) << Describe(worker);
  EXPECT_THAT(worker.output, Not(HasSubstr(planted))) << Describe(worker);
}

TEST_F(RememberedProbesLaneTest, TurnedOffNothingIsRemembered) {
  std::vector<std::string> a = {"run",  "--workspace", install_.workspace(), "--egress",
                                "none", "--",          "/bin/true"};
  CliResult r = RunCodespace(install_, a, {{"CODESPACE_PROBE_CACHE_SECONDS", "0"}});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_NE(::access(Cache().c_str(), F_OK), 0);
}

}  // namespace
}  // namespace codespace::lanes
