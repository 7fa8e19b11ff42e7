// Durable runs, with the real binary: `codespace worker` as a background process, runs
// submitted to it, and the worker (or a supervisor) killed with SIGKILL at points of a run's
// life. A run is never lost or run twice, no log byte is lost (the sealed digest is the digest of
// what the command wrote), and nothing of a run is left running.
#include <fmt/format.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "base/file_util.h"
#include "base/process.h"
#include "harness/fake_internet.h"
#include "lanes/lane_test_util.h"
#include "run/run_spec.h"
#include "supervisor/log_file.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class DurableRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
  }
  void TearDown() override {
    worker_.reset();
    install_.WaitForSupervisors(std::chrono::seconds(5));
    // Whatever a failed test left: supervisors (their argv names this state dir) and, with
    // them (--die-with-parent), their sandboxes; then the markers.
    KillProcessesMatching(install_.state_dir());
    KillProcessesMatching(marker_);
    if (tmpfs_mounted_) ::umount2((install_.state_dir() + "/runs").c_str(), MNT_DETACH);
  }
  std::vector<std::string> Env() {
    return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "CODESPACE_STATE_DIR=" + install_.state_dir(), "CODESPACE_DRAIN_GRACE_MS=3000",
            "CODESPACE_STOP_GRACE_MS=1000"};
    // (drain grace 3 s: the background-writer test writes 1 s after the main process exits)
  }
  void StartWorker() {
    worker_.reset();
    auto log =
        OpenFile((install_.root() + "/worker.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ASSERT_TRUE(log.ok());
    SpawnOptions o;
    o.argv = {install_.codespace(), "-q", "worker"};
    o.env = Env();
    o.fds = {{log->get(), 1}, {log->get(), 2}};
    auto child = Spawn(o);
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    worker_ = std::make_unique<ChildProcess>(std::move(*child));
  }
  void KillWorker() {
    if (worker_) {
      worker_->Signal(SIGKILL).IgnoreError();
      worker_->Wait().status().IgnoreError();
      worker_.reset();
    }
  }
  std::string Submit(const std::vector<std::string>& cmd, std::vector<std::string> flags = {}) {
    std::vector<std::string> a = {"-q", "submit", "--workspace", install_.workspace()};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    CliResult r = RunCodespace(install_, a);
    EXPECT_EQ(r.code(), 0) << Describe(r);
    std::string id = r.output.substr(0, r.output.find('\n'));
    EXPECT_TRUE(IsValidRunId(id)) << r.output;
    return id;
  }
  nlohmann::json Show(const std::string& id) {
    CliResult r = RunCodespace(install_, {"show", id, "--json"});
    auto j = nlohmann::json::parse(r.output, nullptr, false);
    return j.is_discarded() ? nlohmann::json{{"state", "?"}, {"error", r.output}} : j;
  }
  nlohmann::json WaitState(const std::string& id, std::function<bool(const std::string&)> done,
                           std::chrono::seconds limit = 30s) {
    auto until = std::chrono::steady_clock::now() + limit;
    nlohmann::json j;
    while (std::chrono::steady_clock::now() < until) {
      j = Show(id);
      if (j.contains("state") && done(j["state"].get<std::string>())) return j;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "run " << id << " did not get there in time: " << j.dump();
    return j;
  }
  nlohmann::json WaitEnded(const std::string& id, std::chrono::seconds limit = 30s) {
    return WaitState(
        id, [](const std::string& s) { return s != "queued" && s != "running"; }, limit);
  }
  std::string RunDirOf(const std::string& id) { return install_.state_dir() + "/runs/" + id; }
  pid_t SupervisorOf(const std::string& id) {
    auto text = ReadFileToString(RunDirOf(id) + "/supervisor");
    return text.ok() ? static_cast<pid_t>(std::atoi(text->c_str())) : -1;
  }
  // The sealed stdout: its record digest is the digest of the file and of `expected`.
  void ExpectSealedStdout(const nlohmann::json& rec, const std::string& expected) {
    const auto& log = rec["logs"]["stdout"];
    EXPECT_TRUE(log["sealed"].get<bool>()) << rec.dump();
    EXPECT_EQ(log["bytes"].get<uint64_t>(), expected.size()) << rec.dump();
    EXPECT_EQ(log["sha256"].get<std::string>(), Sha256Hex(expected)) << rec.dump();
    auto file = ReadFileToString(RunDirOf(rec["id"]) + "/stdout");
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(*file, expected);
  }

  StagedInstall install_{0};
  std::unique_ptr<ChildProcess> worker_;
  std::string marker_ = MarkerProcess().marker() + "7";  // unique; the sleeps carry it
  bool tmpfs_mounted_ = false;
};

std::string Lines(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += fmt::format("line {}\n", i);
  return s;
}

TEST_F(DurableRunsTest, WorkerRunsASubmittedRunAndSealsItsLogs) {
  StartWorker();
  std::string id = Submit({"/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"});
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_EQ(rec["exit_code"], 3);
  ExpectSealedStdout(rec, "hello\n");
  EXPECT_EQ(rec["logs"]["stderr"]["sha256"], Sha256Hex("oops\n"));
  struct stat st;
  ASSERT_EQ(::stat((RunDirOf(id) + "/stdout").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u) << "sealed logs are read-only";
  CliResult logs = RunCodespace(install_, {"logs", id});
  EXPECT_THAT(logs.output, HasSubstr("hello\n"));
  EXPECT_THAT(logs.output, HasSubstr("oops\n"));
}

TEST_F(DurableRunsTest, BackgroundDescendantOutputIsInTheSealedLog) {
  StartWorker();
  std::string id = Submit({"/bin/sh", "-c", "(sleep 1; echo late) & echo early"});
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  ExpectSealedStdout(rec, "early\nlate\n");
}

TEST_F(DurableRunsTest, DescendantThatNeverClosesIsKilledAfterTheGraceAndTheLogSeals) {
  StartWorker();
  std::string id = Submit({"/bin/sh", "-c", fmt::format("sleep {} & echo started", marker_)});
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  ExpectSealedStdout(rec, "started\n");
  EXPECT_THAT(ProcessesMatching(marker_), ::testing::IsEmpty());
}

TEST_F(DurableRunsTest, QueuedWhileNoWorkerRunsThenPickedUp) {
  std::string id = Submit({"/bin/sh", "-c", "echo once"});
  EXPECT_EQ(Show(id)["state"], "queued");
  StartWorker();
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "exited");
  ExpectSealedStdout(rec, "once\n");
}

TEST_F(DurableRunsTest, WorkerKilledWhileRunningLosesNothing) {
  StartWorker();
  std::string id =
      Submit({"/bin/sh", "-c", "for i in $(seq 1 20); do echo line $i; sleep 0.05; done"});
  WaitState(id, [](const std::string& s) { return s == "running"; });
  for (int i = 0; i < 200 && SupervisorOf(id) <= 0; ++i) std::this_thread::sleep_for(10ms);
  KillWorker();
  pid_t sup = SupervisorOf(id);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(Show(id)["state"], "running") << "the run went on without its worker";
  ASSERT_GT(sup, 0);
  EXPECT_EQ(::kill(sup, 0), 0) << "the supervisor died with the worker";
  StartWorker();
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  ExpectSealedStdout(rec, Lines(20));  // every line, once
}

// The worker forks its supervisors through its spawner, a process it forked while it was still
// one thread (src/supervisor/spawner.h), instead of exec'ing `codespace __supervise` for each.
// When the spawner is gone, runs are not: their supervisors are exec'd again.
TEST_F(DurableRunsTest, SupervisorsComeFromTheWorkersSpawnerAndFromExecWithoutIt) {
  StartWorker();
  auto comm = [](pid_t p) {
    return ReadFileToString(fmt::format("/proc/{}/comm", p)).value_or("");
  };
  pid_t spawner = -1;
  for (int i = 0; i < 300 && spawner < 0; ++i) {
    for (pid_t c : ChildrenOf(worker_->pid())) {
      if (comm(c) == "cs-spawner\n") spawner = c;
    }
    if (spawner < 0) std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(spawner, 0) << "the worker has no spawner";

  std::string id = Submit({"/bin/sh", "-c", fmt::format("sleep 0.5; echo {}", marker_)});
  WaitState(id, [](const std::string& s) { return s == "running"; });
  pid_t sup = -1;
  for (int i = 0; i < 200 && sup <= 0; ++i) {
    sup = SupervisorOf(id);
    if (sup <= 0) std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(sup, 0);
  EXPECT_EQ(comm(sup), "cs-supervisor\n");
  EXPECT_EQ(ProcStatField(sup, 4), std::to_string(spawner))
      << "the supervisor was not forked by the spawner";
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  ExpectSealedStdout(rec, marker_ + "\n");

  ASSERT_EQ(::kill(spawner, SIGKILL), 0);
  auto dead = [&] {  // gone, or a zombie its worker has not reaped
    std::string state = ProcStatField(spawner, 3);
    return state.empty() || state == "Z";
  };
  for (int i = 0; i < 300 && !dead(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(dead());
  std::string again = Submit({"/bin/sh", "-c", "echo again"});
  auto rec2 = WaitEnded(again);
  EXPECT_EQ(rec2["state"], "exited") << rec2.dump();
  ExpectSealedStdout(rec2, "again\n");
  auto log = ReadFileToString(install_.root() + "/worker.log");
  EXPECT_THAT(log.value_or(""), HasSubstr("the spawner failed")) << "no fallback was taken";
}

// Kill -9 the worker again and again through the lives of several runs: queued, claimed,
// setting up, running, sealing. Each run ends recorded once, with every byte.
TEST_F(DurableRunsTest, WorkerKilledAtEveryPointOfManyRunsLosesNothing) {
  constexpr int kRuns = 6;
  std::vector<std::string> ids;
  for (int i = 0; i < kRuns; ++i) {
    ids.push_back(
        Submit({"/bin/sh", "-c",
                fmt::format("for i in $(seq 1 {}); do echo line $i; sleep 0.02; done", 10 + i)}));
  }
  std::mt19937 rng(42);
  for (int round = 0; round < 12; ++round) {
    StartWorker();
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 200));
    KillWorker();
  }
  StartWorker();
  for (int i = 0; i < kRuns; ++i) {
    auto rec = WaitEnded(ids[i], 60s);
    EXPECT_EQ(rec["state"], "exited") << rec.dump();
    ExpectSealedStdout(rec, Lines(10 + i));
  }
}

TEST_F(DurableRunsTest, SupervisorKilledMakesTheRunLostAndLeavesNothingRunning) {
  StartWorker();
  std::string id = Submit({"/bin/sh", "-c", fmt::format("sleep {} & sleep {}", marker_, marker_)});
  WaitState(id, [](const std::string& s) { return s == "running"; });
  // Wait for the sandbox to be up (its identity is written once the command runs).
  for (int i = 0; i < 100 && ::access((RunDirOf(id) + "/sandbox").c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  pid_t sup = SupervisorOf(id);
  ASSERT_GT(sup, 0);
  ASSERT_EQ(::kill(sup, SIGKILL), 0);
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "lost") << rec.dump();
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("died without reporting"));
  std::this_thread::sleep_for(200ms);
  EXPECT_THAT(ProcessesMatching(marker_), ::testing::IsEmpty()) << "a sandboxed process survived";
}

// A filtered run whose supervisor dies: the worker kills the sandbox and tears its namespace,
// veth and NAT table down by name.
TEST_F(DurableRunsTest, SupervisorOfAFilteredRunKilledLeavesNoNetworkBehind) {
  auto net = FakeInternet::Create();
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  // The worker and its supervisors live in the fake internet's worker host.
  worker_.reset();
  auto log =
      OpenFile((install_.root() + "/worker.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_TRUE(log.ok());
  SpawnOptions o;
  o.argv = (*net)->WorkerHostArgv({install_.codespace(), "-q", "worker"}, WorkerResolvConf::kHost);
  o.env = Env();
  o.env->push_back(std::string("CODESPACE_DNS_UPSTREAM=") + kDnsServerV4);
  o.fds = {{log->get(), 1}, {log->get(), 2}};
  auto child = Spawn(o);
  ASSERT_TRUE(child.ok());
  worker_ = std::make_unique<ChildProcess>(std::move(*child));
  std::string id = Submit({"/bin/sh", "-c", fmt::format("sleep {}", marker_)},
                          {"--egress", "allowlist", "--allow", "allowed.test"});
  WaitState(id, [](const std::string& s) { return s == "running"; });
  for (int i = 0; i < 200 && ::access((RunDirOf(id) + "/sandbox").c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  std::string ns = Show(id)["namespace"];
  ASSERT_EQ(::access(("/run/netns/" + ns).c_str(), F_OK), 0) << "the run's namespace is up";
  pid_t sup = SupervisorOf(id);
  ASSERT_GT(sup, 0);
  ASSERT_EQ(::kill(sup, SIGKILL), 0);
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "lost") << rec.dump();
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("its namespace torn down"));
  EXPECT_NE(::access(("/run/netns/" + ns).c_str(), F_OK), 0) << "namespace left behind";
  auto left = (*net)->RunInWorkerHost({"/bin/sh", "-c", "ip -o link; nft list tables"},
                                      std::nullopt, WorkerResolvConf::kHost);
  ASSERT_TRUE(left.ok());
  EXPECT_THAT(left->output, ::testing::Not(HasSubstr("cs" + ns.substr(3) + "h")));
  EXPECT_THAT(left->output, ::testing::Not(HasSubstr("codespace_" + ns.substr(3))));
  EXPECT_THAT(ProcessesMatching(marker_), ::testing::IsEmpty());
  worker_.reset();
}

TEST_F(DurableRunsTest, CancelStopsTheWholeProcessTree) {
  StartWorker();
  std::string id = Submit(
      {"/bin/sh", "-c", fmt::format("sleep {0} & (sleep {0} &); echo up; sleep {0}", marker_)});
  WaitState(id, [](const std::string& s) { return s == "running"; });
  for (int i = 0; i < 100 && ProcessesMatching(marker_).size() < 3; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  CliResult c = RunCodespace(install_, {"cancel", id});
  EXPECT_EQ(c.code(), 0) << Describe(c);
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "cancelled") << rec.dump();
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("cancelled on request"));
  ExpectSealedStdout(rec, "up\n");
  EXPECT_THAT(ProcessesMatching(marker_), ::testing::IsEmpty());
}

TEST_F(DurableRunsTest, CancelOfAQueuedRunNeverStartsIt) {
  std::string id = Submit({"/bin/touch", install_.workspace() + "/ran"});
  CliResult c = RunCodespace(install_, {"cancel", id});
  EXPECT_EQ(c.code(), 0) << Describe(c);
  StartWorker();
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(Show(id)["state"], "cancelled");
  EXPECT_NE(::access((install_.workspace() + "/ran").c_str(), F_OK), 0);
}

TEST_F(DurableRunsTest, TimeoutStopsTheWholeProcessTree) {
  StartWorker();
  std::string id =
      Submit({"/bin/sh", "-c", fmt::format("sleep {0} & sleep {0}", marker_)}, {"--timeout", "1"});
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "cancelled") << rec.dump();
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("timeout"));
  EXPECT_THAT(ProcessesMatching(marker_), ::testing::IsEmpty());
}

TEST_F(DurableRunsTest, NoOutputAndStdoutClosedEarlyAreRecorded) {
  StartWorker();
  std::string quiet = Submit({"/bin/true"});
  std::string closed = Submit({"/bin/sh", "-c", "exec >&-; echo still >&2; sleep 0.3"});
  auto q = WaitEnded(quiet);
  EXPECT_EQ(q["state"], "exited");
  ExpectSealedStdout(q, "");
  auto c = WaitEnded(closed);
  EXPECT_EQ(c["state"], "exited") << c.dump();
  ExpectSealedStdout(c, "");
  EXPECT_EQ(c["logs"]["stderr"]["sha256"], Sha256Hex("still\n"));
}

TEST_F(DurableRunsTest, FullDiskIsRecordedWithAReasonAndHarmsNothingElse) {
  std::string runs = install_.state_dir() + "/runs";
  ASSERT_TRUE(MakeDirs(runs).ok());
  ASSERT_EQ(::mount("tmpfs", runs.c_str(), "tmpfs", 0, "size=1m"), 0);
  tmpfs_mounted_ = true;
  StartWorker();
  std::string id = Submit({"/bin/sh", "-c", "head -c 3000000 /dev/zero; echo done >&2"});
  auto rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_EQ(rec["exit_code"], 0);
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("No space left on device"));
  // What did reach the log is what the digest says.
  auto on_disk = Sha256OfFile(RunDirOf(id) + "/stdout");
  ASSERT_TRUE(on_disk.ok());
  EXPECT_EQ(rec["logs"]["stdout"]["sha256"], *on_disk);
  // The worker is still up and the store still answers.
  ASSERT_TRUE(worker_ && worker_->running());
  EXPECT_EQ(Show(id)["id"], id);
  if (HasFailure()) {
    auto log = ReadFileToString(install_.root() + "/worker.log");
    ADD_FAILURE() << "worker log:\n" << log.value_or("(none)");
  }
}

// The same through the foreground `codespace run`, whose supervisor tells it "recorded" once
// status.json is written. Here status.json cannot be written: the supervisor records the outcome
// itself and exits, and the CLI, told nothing, must still end with the command's exit code and
// the record as the supervisor left it.
TEST_F(DurableRunsTest, FullDiskForegroundRunEndsWithItsOutcomeRecorded) {
  std::string runs = install_.state_dir() + "/runs";
  ASSERT_TRUE(MakeDirs(runs).ok());
  ASSERT_EQ(::mount("tmpfs", runs.c_str(), "tmpfs", 0, "size=1m"), 0);
  tmpfs_mounted_ = true;
  CliResult r = RunCodespace(install_, {"run", "--workspace", install_.workspace(), "--", "/bin/sh",
                                        "-c", "head -c 3000000 /dev/zero; exit 3"});
  EXPECT_EQ(r.code(), 3) << Describe(r);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_EQ(rec["exit_code"], 3);
  std::string reason = rec.value("reason", "");
  EXPECT_THAT(reason, HasSubstr("status: ")) << "status.json was written after all";
  EXPECT_THAT(reason, HasSubstr("No space left on device"));
  std::string status = RunDirOf(rec["id"].get<std::string>()) + "/status.json";
  EXPECT_NE(::access(status.c_str(), F_OK), 0) << "status.json was written after all";
}

// 1 GiB through the supervisor into a sealed log: memory stays bounded (measured), the digest
// is right.
TEST_F(DurableRunsTest, OneGibibyteOfOutputInBoundedMemory) {
  StartWorker();
  std::string id = Submit({"/usr/bin/head", "-c", "1073741824", "/dev/zero"});
  auto rec = WaitEnded(id, 120s);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_EQ(rec["logs"]["stdout"]["bytes"].get<uint64_t>(), 1073741824u);
  // sha256 of 2^30 zero bytes.
  EXPECT_EQ(rec["logs"]["stdout"]["sha256"],
            "49bc20df15e412a64472421e13fe86ff1c5165e18b2afccf160d4dc19fe68a14");
  auto status = ReadFileToString(RunDirOf(id) + "/status.json");
  ASSERT_TRUE(status.ok());
  auto st = nlohmann::json::parse(*status, nullptr, false);
  uint64_t supervisor_kb = st["supervisor_peak_rss_kb"].get<uint64_t>();
  RecordProperty("supervisor_peak_rss_kb", std::to_string(supervisor_kb));
  EXPECT_LT(supervisor_kb, 64u * 1024) << "supervisor peak RSS";
  auto worker_status = ReadFileToString(fmt::format("/proc/{}/status", worker_->pid()));
  ASSERT_TRUE(worker_status.ok());
  size_t at = worker_status->find("VmHWM:");
  uint64_t worker_kb = std::strtoull(worker_status->c_str() + at + 6, nullptr, 10);
  RecordProperty("worker_peak_rss_kb", std::to_string(worker_kb));
  EXPECT_LT(worker_kb, 64u * 1024) << "worker peak RSS";
  ::unlink((RunDirOf(id) + "/stdout").c_str());
}

}  // namespace
}  // namespace codespace::lanes
