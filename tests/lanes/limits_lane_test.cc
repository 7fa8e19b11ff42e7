// Limits lanes (issue 15): memory, processes, /tmp size enforced by a cgroup per run (v1 on this
// machine and CI; v2 where the host has it), recorded, and refused where the host cannot
// enforce them. Root, uid 1654 with a delegated subtree, and unconfined.
#include <fmt/format.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "base/file_util.h"
#include "base/process.h"
#include "lanes/lane_test_util.h"
#include "limits/run_cgroup.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Allocates and touches `mb` MiB, 1 MiB at a time, then says so.
std::vector<std::string> MemoryHog(int mb) {
  return {
      "python3", "-c",
      fmt::format("l=[]\nfor i in range({}): l.append(b'x' * (1 << 20))\nprint('allocated')", mb)};
}

class LimitsLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    layout_ = DetectCgroupLayout("/sys/fs/cgroup");
    if (layout_.hierarchy == CgroupHierarchy::kNone)
      GTEST_SKIP() << "limits=none: " << layout_.reason;
    ASSERT_TRUE(install_.ok()) << install_.error();
    for (const auto& [c, parent] : layout_.parents) {
      if (::access((parent + "/codespace").c_str(), F_OK) != 0)
        made_.push_back(parent + "/codespace");
    }
  }
  // The codespace/ directories these runs made, once empty (rmdir refuses a non-empty one, so a
  // concurrent run's cgroup keeps its parent).
  void TearDown() override {
    for (const auto& dir : made_) ::rmdir(dir.c_str());
  }
  CliResult Run(const std::vector<std::string>& flags, const std::vector<std::string>& command,
                const std::map<std::string, std::string>& env = {}) {
    std::vector<std::string> args = {"run", "--workspace", install_.workspace()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return RunCodespace(install_, args, env);
  }
  // No cgroup of the run is left in any controller.
  void ExpectNoCgroupOf(const std::string& id) {
    for (const auto& [c, parent] : layout_.parents) {
      EXPECT_NE(::access(RunCgroupDir(parent, id).c_str(), F_OK), 0) << c << ": left behind";
    }
  }
  CgroupLayout layout_;
  std::vector<std::string> made_;
  StagedInstall install_{0};
};

TEST_F(LimitsLaneTest, PostureSaysWhichHierarchy) {
  CliResult r = RunCodespace(install_, {"posture"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output,
              HasSubstr(fmt::format("limits={}", CgroupHierarchyName(layout_.hierarchy))));
}

TEST_F(LimitsLaneTest, AMemoryHogIsKilledAtItsLimitAndRecordedSoWhileARunBesideItCarriesOn) {
  CliResult beside;
  std::thread other([&] {
    beside = Run({"--memory", "64M"}, {"sh", "-c", "sleep 3; echo carried-on"});
  });
  ::usleep(300 * 1000);
  CliResult hog = Run({"--memory", "64M"}, MemoryHog(256));
  other.join();
  EXPECT_EQ(hog.code(), 128 + 9) << Describe(hog);
  EXPECT_THAT(hog.output, Not(HasSubstr("allocated")));
  // Both records, told apart by their command.
  CliResult list = RunCodespace(install_, {"runs", "--json"});
  ASSERT_EQ(list.code(), 0) << Describe(list);
  auto runs = nlohmann::json::parse(list.output.substr(list.output.find('[')), nullptr, false);
  ASSERT_TRUE(runs.is_array()) << list.output;
  nlohmann::json hog_rec, other_rec;
  for (const auto& r : runs) {
    (r["spec"]["argv"][0] == "python3" ? hog_rec : other_rec) = r;
  }
  ASSERT_FALSE(hog_rec.is_null()) << list.output;
  EXPECT_EQ(hog_rec["state"], "exited") << hog_rec.dump();
  EXPECT_EQ(hog_rec["signal"], 9);
  EXPECT_EQ(hog_rec["reason"], "killed: memory limit 64 MiB reached") << hog_rec.dump();
  EXPECT_EQ(hog_rec["spec"]["limits"]["memory"], 64u << 20);
  EXPECT_EQ(hog_rec["usage"]["limit_kill"], "memory");
  EXPECT_GE(hog_rec["usage"]["oom_kills"].get<uint64_t>(), 1u);
  uint64_t peak = hog_rec["usage"]["peak_memory_bytes"].get<uint64_t>();
  EXPECT_LE(peak, 64u << 20);
  EXPECT_GE(peak, 32u << 20);
  ExpectNoCgroupOf(hog_rec["id"]);
  // The run beside it was not touched.
  EXPECT_EQ(beside.code(), 0) << Describe(beside);
  EXPECT_THAT(beside.output, HasSubstr("carried-on"));
  EXPECT_EQ(other_rec["state"], "exited") << other_rec.dump();
  EXPECT_EQ(other_rec["exit_code"], 0);
  // `show` prints the limits and the usage.
  CliResult show = RunCodespace(install_, {"show", hog_rec["id"]});
  EXPECT_THAT(show.output, HasSubstr("memory=64 MiB"));
  EXPECT_THAT(show.output, HasSubstr("ended by its memory limit"));
}

TEST_F(LimitsLaneTest, AForkBombStopsAtItsProcessLimitAndNothingOfItIsLeft) {
  const std::string marker = fmt::format("forkbomb-marker-{}", ::getpid());
  // 200 sleepers asked for; the cgroup holds 48 processes (bubblewrap, the sandbox's init,
  // codespace-init and the shell among them).
  CliResult r = Run({"--pids", "48"},
                    {"sh", "-c",
                     fmt::format("i=0; while [ $i -lt 200 ]; do sleep 300 & i=$((i+1)); done; "
                                 "echo spawned # {}",
                                 marker)},
                    {{"CODESPACE_DRAIN_GRACE_MS", "300"}});
  EXPECT_THAT(r.output, HasSubstr("fork")) << Describe(r);  // dash: "Cannot fork"
  auto rec = LatestRecord(install_);
  ASSERT_TRUE(rec["usage"].is_object()) << rec.dump();
  if (!rec["usage"]["peak_pids"].is_null()) {
    EXPECT_EQ(rec["usage"]["peak_pids"], 48) << rec.dump();
  }
  ExpectNoCgroupOf(rec["id"]);
  EXPECT_TRUE(ProcessesMatching(marker).empty());
  // The host can still fork.
  auto t = RunCommand({"/bin/true"});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(t->status.success());
}

TEST_F(LimitsLaneTest, TmpFilledPastItsSizeIsENOSPCInside) {
  CliResult r =
      Run({"--tmp-size", "8M"},
          {"sh", "-c",
           "for d in /tmp /var/tmp; do dd if=/dev/zero of=$d/fill bs=1M count=32 "
           "2>&1 | grep -o 'No space left on device' | head -1; stat -c \"$d %s\" $d/fill; "
           "done"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("No space left on device"));
  // What the run could put in host memory through each tmpfs: at most the cap.
  for (const char* d : {"/tmp ", "/var/tmp "}) {
    size_t at = r.output.find(d);
    ASSERT_NE(at, std::string::npos) << Describe(r);
    uint64_t size = std::strtoull(r.output.c_str() + at + strlen(d), nullptr, 10);
    EXPECT_LE(size, 8u << 20) << d;
    EXPECT_GE(size, 4u << 20) << d;
  }
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["spec"]["limits"]["tmp_size"], 8u << 20);
}

TEST_F(LimitsLaneTest, TheRunSeesNoCgroupFileSystemAndCannotWriteOne) {
  // Control: outside the sandbox this process may write the hierarchy.
  std::string procs = layout_.parents.begin()->second + "/cgroup.procs";
  ASSERT_EQ(::access(procs.c_str(), W_OK), 0) << procs;
  CliResult r = Run({"--memory", "256M"},
                    {"sh", "-c",
                     "echo entries=$(ls -A /sys/fs/cgroup | wc -l); "
                     "mkdir /sys/fs/cgroup/x 2>/dev/null && echo WROTE; "
                     "for f in /sys/fs/cgroup/*/cgroup.procs /sys/fs/cgroup/cgroup.procs; do "
                     "[ -e $f ] && echo 0 > $f 2>/dev/null && echo WROTE $f; done; "
                     "grep memory /proc/self/cgroup || cat /proc/self/cgroup"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("entries=0"));
  EXPECT_THAT(r.output, Not(HasSubstr("WROTE")));
  // Its own cgroup namespace: its cgroup is the root of what it sees.
  if (layout_.hierarchy == CgroupHierarchy::kV1) {
    EXPECT_THAT(r.output, HasSubstr(":memory:/\n"));
  }
}

TEST_F(LimitsLaneTest, LimitsOnAHostWithLimitsNoneAreRefusedWithTheReason) {
  std::map<std::string, std::string> env = {{"CODESPACE_CGROUP_ROOT", "/nonexistent/cgroup-root"}};
  CliResult posture = RunCodespace(install_, {"posture"}, env);
  EXPECT_THAT(posture.output, HasSubstr("limits=none limitsUnavailable=\"the cgroup root "
                                        "/nonexistent/cgroup-root does not exist\""));
  CliResult r = Run({"--memory", "64M"}, {"sh", "-c", "echo RAN"}, env);
  EXPECT_EQ(r.code(), 125) << Describe(r);
  EXPECT_THAT(r.output, Not(HasSubstr("RAN")));
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "refused") << rec.dump();
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("limits=none"));
  EXPECT_THAT(rec["reason"].get<std::string>(),
              HasSubstr("/nonexistent/cgroup-root does not exist"));
  // Without limits it runs (no cgroup, no usage).
  CliResult plain = Run({}, {"sh", "-c", "echo RAN"}, env);
  EXPECT_EQ(plain.code(), 0) << Describe(plain);
  // CODESPACE_REQUIRE_LIMITS=1 refuses even that.
  env["CODESPACE_REQUIRE_LIMITS"] = "1";
  CliResult required = Run({}, {"sh", "-c", "echo RAN"}, env);
  EXPECT_EQ(required.code(), 125) << Describe(required);
}

TEST_F(LimitsLaneTest, AboveTheWorkersMaximumIsRefusedBeforeAnythingIsSpent) {
  CliResult r = Run({"--memory", "4G"}, {"sh", "-c", "echo RAN"}, {{"CODESPACE_MAX_MEMORY", "1G"}});
  EXPECT_EQ(r.code(), 125) << Describe(r);
  EXPECT_THAT(r.output, Not(HasSubstr("RAN")));
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "refused");
  EXPECT_THAT(rec["reason"].get<std::string>(),
              HasSubstr("--memory 4 GiB is above this worker's maximum of 1 GiB"));
  // Defaults fill in what the run did not set, and are recorded.
  CliResult d = Run({}, {"true"}, {{"CODESPACE_DEFAULT_PIDS", "100"}});
  EXPECT_EQ(d.code(), 0) << Describe(d);
  EXPECT_EQ(LatestRecord(install_)["spec"]["limits"]["pids"], 100);
}

TEST_F(LimitsLaneTest, OpenFilesAreCappedBeforeExec) {
  CliResult r = Run({"--nofile", "64"}, {"sh", "-c", "ulimit -n"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("64"));
}

TEST_F(LimitsLaneTest, UnconfinedRunsAreLimitedTooButGetNoTmpSize) {
  std::map<std::string, std::string> env = {{"CODESPACE_BWRAP_PATH", "/nonexistent/bwrap"}};
  CliResult hog = Run({"--memory", "64M"}, MemoryHog(256), env);
  EXPECT_EQ(hog.code(), 128 + 9) << Describe(hog);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["reason"], "killed: memory limit 64 MiB reached") << rec.dump();
  ExpectNoCgroupOf(rec["id"]);
  CliResult tmp = Run({"--tmp-size", "8M"}, {"true"}, env);
  EXPECT_EQ(tmp.code(), 125) << Describe(tmp);
  EXPECT_THAT(LatestRecord(install_)["reason"].get<std::string>(), HasSubstr("no private /tmp"));
}

// uid 1654 with a delegated subtree: root makes codespace/ in each controller and gives it to
// the uid (as a systemd Delegate=yes or an operator would), and takes it back after.
class DelegatedLimitsLaneTest : public LimitsLaneTest {
 protected:
  void SetUp() override {
    LimitsLaneTest::SetUp();
    if (IsSkipped()) return;
    for (const auto& [c, parent] : layout_.parents) {
      std::string dir = parent + "/codespace";
      bool made = ::mkdir(dir.c_str(), 0755) == 0;
      delegated_.push_back({dir, made});
      Chown(dir, kUnprivilegedUid);
    }
  }
  void TearDown() override {
    for (const auto& [dir, made] : delegated_) {
      Chown(dir, 0);
      if (made) ::rmdir(dir.c_str());
    }
    LimitsLaneTest::TearDown();
  }
  static void Chown(const std::string& dir, uid_t uid) {
    if (::chown(dir.c_str(), uid, uid) != 0) return;
    for (const char* f : {"cgroup.procs", "tasks", "cgroup.subtree_control"}) {
      std::string p = dir + "/" + f;
      if (::access(p.c_str(), F_OK) == 0 && ::chown(p.c_str(), uid, uid) != 0) {
        ADD_FAILURE() << "chown " << p;
      }
    }
  }
  std::vector<std::pair<std::string, bool>> delegated_;
  StagedInstall unpriv_{kUnprivilegedUid};
};

TEST_F(DelegatedLimitsLaneTest, AnUnprivilegedWorkerLimitsItsRunsInItsDelegatedSubtree) {
  ASSERT_TRUE(unpriv_.ok()) << unpriv_.error();
  CliResult posture = RunCodespace(unpriv_, {"posture"});
  EXPECT_THAT(posture.output,
              HasSubstr(fmt::format("limits={}", CgroupHierarchyName(layout_.hierarchy))))
      << Describe(posture);
  std::vector<std::string> args = {
      "run", "--workspace", unpriv_.workspace(), "--memory", "64M", "--pids", "32", "--"};
  for (const auto& a : MemoryHog(256)) args.push_back(a);
  CliResult r = RunCodespace(unpriv_, args);
  EXPECT_EQ(r.code(), 128 + 9) << Describe(r);
  auto rec = LatestRecord(unpriv_);
  EXPECT_EQ(rec["reason"], "killed: memory limit 64 MiB reached") << rec.dump();
  ExpectNoCgroupOf(rec["id"]);
}

TEST_F(LimitsLaneTest, AnUnprivilegedWorkerWithoutADelegatedSubtreeRefusesLimits) {
  StagedInstall unpriv{kUnprivilegedUid};
  ASSERT_TRUE(unpriv.ok()) << unpriv.error();
  CliResult r = RunCodespace(unpriv, {"run", "--workspace", unpriv.workspace(), "--memory", "64M",
                                      "--", "sh", "-c", "echo RAN"});
  EXPECT_EQ(r.code(), 125) << Describe(r);
  EXPECT_THAT(r.output, Not(HasSubstr("RAN")));
  EXPECT_THAT(LatestRecord(unpriv)["reason"].get<std::string>(), HasSubstr("limits=none"));
}

}  // namespace
}  // namespace codespace::lanes
