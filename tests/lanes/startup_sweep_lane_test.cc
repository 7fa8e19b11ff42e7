// Teardown by name under the postures that tell its keys apart, with the real binary as a root
// worker in the fake internet's worker host:
//
//  * the start-up sweep keys on the tools alone, never on CanFilter (SPEC, Supervision): a host
//    that can no longer filter — here forwarding is off and /proc/sys is read-only, while ip, nft
//    and root's namespace privilege are intact — must still remove what its finished runs left;
//  * it touches finished runs only: a second worker start while a run of the same store is in
//    flight leaves that run's network alone;
//  * a run whose supervisor died (lost) has its namespace torn down by name by the worker that
//    finds it, keyed on the tools too: here the worker restarts on a host that lost CanFilter
//    while the run was in flight.
//
// Whatever the test's outcome, the named namespaces it makes are removed; veths and tables live in
// the worker host and die with it.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "base/file_util.h"
#include "harness/fake_internet.h"
#include "lanes/fake_internet_lane.h"
#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// /proc/sys bound read-only over itself in a mount namespace of the worker's own: ip_forward (0 in
// the worker host) then neither reads 1 nor passes access(W_OK), so this host cannot filter. (An
// over-mounted /proc also keeps bubblewrap from mounting a fresh one, so it does not confine
// either; the sweep must not care.)
const std::vector<std::string> kReadOnlyProcSys = {
    "/usr/bin/unshare",
    "--mount",
    "--propagation",
    "slave",
    "--",
    "/bin/sh",
    "-c",
    "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && exec \"$@\"",
    "sh"};

// Forwarding stays as the kernel has it: these tests set it themselves, to what they test.
class StartupSweepLaneTest : public FakeInternetLaneTest {
 protected:
  StartupSweepLaneTest() : FakeInternetLaneTest(/*worker_host_ipv6_forwarding=*/false) {}
  // `codespace ARGS` as a root worker in the worker host, inside `staging` (an argv prefix).
  CliResult Worker(const std::vector<std::string>& args, std::vector<std::string> staging = {}) {
    return RunCodespaceAs(install_, 0, args, {{"CODESPACE_DNS_UPSTREAM", kDnsServerV4}},
                          net_->WorkerHostArgv(std::move(staging), WorkerResolvConf::kHost));
  }
  std::vector<std::string> RunArgs(std::vector<std::string> flags,
                                   const std::vector<std::string>& cmd) {
    flags.insert(flags.begin(), {"run", "--workspace", install_.workspace()});
    flags.push_back("--");
    flags.insert(flags.end(), cmd.begin(), cmd.end());
    return flags;
  }
  // What a worker killed mid-teardown leaves of run namespace `ns`: the named namespace, the
  // worker side's veth and the worker's NAT table.
  void LeaveBehind(const std::string& ns) {
    const std::string id12 = ns.substr(3);
    auto made = net_->RunInWorkerHost(
        {"/bin/sh", "-c",
         fmt::format("ip netns add {0} && ip link add cs{1}h type veth peer name cs{1}p && "
                     "nft add table inet codespace_{1} && echo made",
                     ns, id12)},
        std::nullopt, WorkerResolvConf::kHost);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    ASSERT_THAT(made->output, HasSubstr("made"));
  }
  // Namespaces, links and nftables tables as the worker host sees them.
  std::string WorkerHostState() {
    auto left =
        net_->RunInWorkerHost({"/bin/sh", "-c", "ip netns list; ip -o link; nft list tables"},
                              std::nullopt, WorkerResolvConf::kHost);
    return left.ok() ? left->output : "error: " + left.status().ToString();
  }
};

TEST_F(StartupSweepLaneTest, HostThatCannotFilterStillSweepsFinishedRunsByName) {
  ASSERT_TRUE(net_->SetWorkerHostForwarding(false).ok());
  // The posture this test is about: the tools are there, CanFilter is not, because of forwarding.
  CliResult posture = Worker({"posture"}, kReadOnlyProcSys);
  ASSERT_EQ(posture.code(), 0) << Describe(posture);
  ASSERT_THAT(posture.output, HasSubstr("tools=yes canFilter=no"));
  ASSERT_THAT(posture.output, HasSubstr("filterUnavailable=\"IPv4 forwarding is off"));

  // A finished filtered run of this store: unconfined with the tools, its setup aborts at
  // forwarding (and removes what it made).
  CliResult first = Worker(RunArgs({"--egress", "allowlist", "--allow", kAllowedV4}, {"/bin/true"}),
                           kReadOnlyProcSys);
  EXPECT_EQ(first.code(), 125) << Describe(first);
  auto rec = LatestRecord(install_);
  ASSERT_EQ(rec["state"], "aborted") << rec.dump();
  ASSERT_THAT(rec["reason"].get<std::string>(), HasSubstr("enable forwarding"));
  const std::string ns = rec["namespace"];
  ASSERT_THAT(ns, ::testing::MatchesRegex("cs-[0-9a-f]{12}"));
  NetnsCleanup cleanup(ns);
  LeaveBehind(ns);

  CliResult next = Worker(RunArgs({"--egress", "none"}, {"/bin/true"}), kReadOnlyProcSys);
  EXPECT_EQ(next.code(), 0) << Describe(next);
  EXPECT_THAT(next.output, HasSubstr("removed 1 leftover namespace(s) of finished runs"))
      << "a host that cannot filter (but has the tools) did not sweep: " << Describe(next);
  const std::string left = WorkerHostState();
  EXPECT_THAT(left, Not(HasSubstr(ns)));
  EXPECT_THAT(left, Not(HasSubstr("cs" + ns.substr(3) + "h")));
  EXPECT_THAT(left, Not(HasSubstr("codespace_" + ns.substr(3))));
}

TEST_F(StartupSweepLaneTest, SweepLeavesARunInFlightAlone) {
  ASSERT_TRUE(net_->SetWorkerHostForwarding(true).ok());
  // A filtered run that is still running when a second worker starts on the same store.
  auto in_flight = std::async(std::launch::async, [&] {
    return Worker(RunArgs(
        {"--egress", "allowlist", "--allow", kAllowedName},
        {"/bin/sh", "-c", "sleep 3; exec \"$0\" connect-name allowed.test 80", install_.probe()}));
  });
  // Wait for its namespace to exist: before that there is nothing for a sweep to get wrong.
  std::string ns;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    auto rec = LatestRecord(install_);
    if (rec.contains("state") && rec["state"] == "running" && rec["namespace"].is_string()) {
      std::string name = rec["namespace"];
      if (!name.empty() && ::access(("/run/netns/" + name).c_str(), F_OK) == 0) {
        ns = name;
        break;
      }
    }
  }
  ASSERT_FALSE(ns.empty()) << "the first run never reached its namespace";
  NetnsCleanup cleanup(ns);

  CliResult second = Worker(RunArgs({"--egress", "none"}, {"/bin/true"}));
  EXPECT_EQ(second.code(), 0) << Describe(second);
  EXPECT_THAT(second.output, Not(HasSubstr("leftover namespace"))) << Describe(second);
  EXPECT_EQ(::access(("/run/netns/" + ns).c_str(), F_OK), 0)
      << "the second worker's sweep removed the namespace of a run in flight";

  CliResult first = in_flight.get();
  EXPECT_EQ(first.code(), 0) << "the run in flight lost its network: " << Describe(first);
  // Its supervisor tears its network down after recording it: before `cleanup` may delete the
  // namespace under it.
  EXPECT_TRUE(install_.WaitForSupervisors());
}

class LostRunTeardownLaneTest : public StartupSweepLaneTest {
 protected:
  void TearDown() override {
    StopWorker();
    install_.WaitForSupervisors(std::chrono::seconds(5));
    // Whatever a failed test left: supervisors (their argv names this state dir) and, with them
    // (--die-with-parent), their sandboxes.
    KillProcessesMatching(install_.state_dir());
  }
  // `codespace worker` in the worker host, inside `staging`, in the background.
  void StartWorker(std::vector<std::string> staging = {}) {
    StopWorker();
    auto log = OpenFile((install_.root() + "/worker.log").c_str(),
                        O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    staging.insert(staging.end(), {install_.codespace(), "-q", "worker"});
    SpawnOptions o;
    o.argv = net_->WorkerHostArgv(std::move(staging), WorkerResolvConf::kHost);
    o.env = std::vector<std::string>{
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "CODESPACE_STATE_DIR=" + install_.state_dir(),
        std::string("CODESPACE_DNS_UPSTREAM=") + kDnsServerV4};
    o.fds = {{log->get(), 1}, {log->get(), 2}};
    auto child = Spawn(o);
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    worker_ = std::make_unique<ChildProcess>(std::move(*child));
  }
  void StopWorker() {
    if (!worker_) return;
    worker_->Signal(SIGKILL).IgnoreError();
    worker_->Wait().status().IgnoreError();
    worker_.reset();
  }
  nlohmann::json Show(const std::string& id) {
    CliResult r = RunCodespace(install_, {"show", id, "--json"});
    auto j = nlohmann::json::parse(r.output, nullptr, false);
    return j.is_discarded() ? nlohmann::json{{"state", "?"}, {"error", r.output}} : j;
  }
  // Polls the record until `done(record)`; the last record either way.
  nlohmann::json WaitFor(const std::string& id,
                         const std::function<bool(const nlohmann::json&)>& done) {
    nlohmann::json j;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         std::chrono::steady_clock::now() < until;
         std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
      j = Show(id);
      if (done(j)) return j;
    }
    ADD_FAILURE() << "run " << id << " did not get there in time: " << j.dump();
    return j;
  }
  std::string WorkerLog() {
    return ReadFileToString(install_.root() + "/worker.log").value_or("(no worker log)");
  }

  std::unique_ptr<ChildProcess> worker_;
};

TEST_F(LostRunTeardownLaneTest, LostRunIsTornDownByNameOnAHostThatNoLongerFilters) {
  ASSERT_TRUE(net_->SetWorkerHostForwarding(true).ok());
  StartWorker();
  CliResult submitted = Worker({"-q", "submit", "--workspace", install_.workspace(), "--egress",
                                "allowlist", "--allow", kAllowedName, "--", "/bin/sleep", "20"});
  ASSERT_EQ(submitted.code(), 0) << Describe(submitted);
  const std::string id = submitted.output.substr(0, submitted.output.find('\n'));
  // Running, in its own namespace.
  auto rec = WaitFor(id, [](const nlohmann::json& j) {
    if (!j.contains("state") || j["state"] != "running" || !j["namespace"].is_string()) {
      return false;
    }
    std::string ns = j["namespace"];
    return !ns.empty() && ::access(("/run/netns/" + ns).c_str(), F_OK) == 0;
  });
  ASSERT_EQ(rec["state"], "running") << rec.dump() << "\n" << WorkerLog();
  const std::string ns = rec["namespace"];
  NetnsCleanup cleanup(ns);

  // The worker and the run's supervisor die; the run's namespace, veth and table stay behind.
  StopWorker();
  auto sup = ReadFileToString(install_.state_dir() + "/runs/" + id + "/supervisor");
  ASSERT_TRUE(sup.ok()) << sup.status().ToString();
  const pid_t sup_pid = static_cast<pid_t>(std::atoi(sup->c_str()));
  ASSERT_GT(sup_pid, 0);
  ASSERT_EQ(::kill(sup_pid, SIGKILL), 0);
  ASSERT_EQ(::access(("/run/netns/" + ns).c_str(), F_OK), 0);

  // The host loses CanFilter (forwarding off, /proc/sys read-only), keeps the tools; the worker
  // restarts there and finds the run lost.
  ASSERT_TRUE(net_->SetWorkerHostForwarding(false).ok());
  CliResult posture = Worker({"posture"}, kReadOnlyProcSys);
  ASSERT_THAT(posture.output, HasSubstr("tools=yes canFilter=no")) << Describe(posture);
  StartWorker(kReadOnlyProcSys);
  rec = WaitFor(
      id, [](const nlohmann::json& j) { return j.contains("state") && j["state"] == "lost"; });
  EXPECT_EQ(rec["state"], "lost") << rec.dump() << "\n" << WorkerLog();
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("its namespace torn down")) << rec.dump();
  const std::string left = WorkerHostState();
  EXPECT_THAT(left, Not(HasSubstr(ns))) << "the lost run's namespace was left behind";
  EXPECT_THAT(left, Not(HasSubstr("cs" + ns.substr(3) + "h")));
  EXPECT_THAT(left, Not(HasSubstr("codespace_" + ns.substr(3))));
}

}  // namespace
}  // namespace codespace::lanes
