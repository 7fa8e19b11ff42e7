// Root lane: the worker runs as root, where bubblewrap confines and the host can filter.
#include <dirent.h>
#include <fmt/format.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <set>
#include <thread>

#include "base/file_util.h"
#include "base/unique_fd.h"
#include "lanes/lane_test_util.h"
#include "supervisor/run_dir.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The pid of the supervisor of a run of `install` other than `skip`, 0 until one has written
// its identity.
pid_t NewSupervisor(const StagedInstall& install, const std::set<std::string>& skip) {
  for (const std::string& id : install.RunIds()) {
    if (skip.count(id)) continue;
    auto sup = ReadIdentity(RunDirFor(install.state_dir(), id).supervisor_path());
    if (sup.ok() && sup->pid > 0) return sup->pid;
  }
  return 0;
}

class RootLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
    ASSERT_TRUE(service_.ok());
  }
  CliResult Run(const std::vector<std::string>& flags, const std::vector<std::string>& cmd) {
    std::vector<std::string> a = {"run", "--workspace", install_.workspace()};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return RunCodespace(install_, a);
  }
  std::string Port() const { return std::to_string(service_.port()); }
  // Warms the remembered probes with one run, then has them name `script` (written into the
  // install as `name`) as bubblewrap: the runs that follow launch through it.
  void PlantBubblewrap(const std::string& name, const std::string& script) {
    CliResult first = Run({}, {"/bin/true"});
    ASSERT_EQ(first.code(), 0) << Describe(first);
    const std::string path = install_.root() + "/" + name;
    ASSERT_TRUE(WriteFileAtomically(path, script, 0755).ok());
    const std::string cache = install_.state_dir() + "/host-probes";
    auto text = ReadFileToString(cache);
    ASSERT_TRUE(text.ok());
    size_t at = text->find("\nbwrap_path ");
    ASSERT_NE(at, std::string::npos);
    size_t end = text->find('\n', at + 1);
    ASSERT_TRUE(WriteFileAtomically(
                    cache, text->substr(0, at) + "\nbwrap_path " + path + text->substr(end), 0600)
                    .ok());
  }

  // bubblewrap and its child, both still bubblewrap while held (the child never gets to exec);
  // not the CLI or the supervisor, whose command lines hold the marker too.
  static std::vector<pid_t> Bubblewraps(const std::string& marker) {
    std::vector<pid_t> out;
    for (pid_t p : ProcessesMatching(marker)) {
      if (ReadFileToString(fmt::format("/proc/{}/comm", p)).value_or("") == "bwrap\n") {
        out.push_back(p);
      }
    }
    return out;
  }

  // Plants a stand-in that runs the real bubblewrap with --userns-block-fd on a FIFO nobody
  // writes, which holds it in its last step of setup: --die-with-parent armed, its child not yet
  // told to go on (bubblewrap refuses that with --disable-userns, which is dropped). Starts
  // `sleep <marker>` through it on `*cli` (its result in `*r`); `*sup` is its supervisor once
  // bubblewrap and its child are both there.
  void StartRunHeldInBubblewrapSetup(const std::string& marker, std::thread* cli, CliResult* r,
                                     pid_t* sup) {
    const std::string fifo = install_.root() + "/never-written";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // bubblewrap runs as the run's leased uid (docs/identity.md): the fifo must open for it.
    ASSERT_EQ(::chmod(fifo.c_str(), 0666), 0);
    ASSERT_NO_FATAL_FAILURE(PlantBubblewrap(
        "held-bwrap",
        fmt::format("#!/bin/sh\n"
                    "exec 8>/dev/null 9<>{}\n"
                    "for a do shift; [ \"$a\" = --disable-userns ] || set -- \"$@\" \"$a\"; done\n"
                    "exec /usr/bin/bwrap --info-fd 8 --userns-block-fd 9 \"$@\"\n",
                    fifo)));
    const std::set<std::string> before = install_.RunIds();
    *cli = std::thread([this, marker, r] {
      *r = Run({}, {"/bin/sh", "-c", "exec sleep " + marker});
    });
    *sup = 0;
    for (int i = 0; i < 500 && (*sup == 0 || Bubblewraps(marker).size() < 2); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      *sup = NewSupervisor(install_, before);
    }
    EXPECT_EQ(Bubblewraps(marker).size(), 2u) << "bubblewrap is not held in its setup";
  }

  StagedInstall install_{0};
  LoopbackListener service_;
};

TEST_F(RootLaneTest, PostureSaysConfinesAndCanFilter) {
  CliResult r = RunCodespace(install_, {"posture"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("posture uid=0 confines=yes"));
  EXPECT_THAT(r.output, HasSubstr("tools=yes canFilter=yes allowlist=filtered"));
}

TEST_F(RootLaneTest, NoneIsSeveredWithOnlyLoopback) {
  CliResult r = Run({"--egress", "none"}, {install_.probe(), "links"});
  ASSERT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("\nlo\n"));
  EXPECT_THAT(r.output, Not(HasSubstr("eth0")));
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["plan"], "severed") << rec.dump();
  EXPECT_EQ(rec["network"], "severed");
  EXPECT_EQ(rec["state"], "exited");
  EXPECT_EQ(rec["exit_code"], 0);
}

TEST_F(RootLaneTest, NoneCannotReachTheWorkersLoopbackService) {
  // The service is reachable from here: the wall, not a dead service, is what stops the run.
  CliResult open = Run({"--egress", "open"}, {install_.probe(), "connect", "127.0.0.1", Port()});
  ASSERT_EQ(open.code(), 0) << Describe(open);
  CliResult r = Run({"--egress", "none"}, {install_.probe(), "no-connect", "127.0.0.1", Port()});
  EXPECT_EQ(r.code(), 0) << "severed run reached the worker's loopback: " << Describe(r);
}

TEST_F(RootLaneTest, OpenIsSharedAndReachesTheService) {
  CliResult r = Run({"--egress", "open"}, {install_.probe(), "connect", "127.0.0.1", Port()});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("connected"));
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["plan"], "shared") << rec.dump();
  EXPECT_EQ(rec["network"], "shared");
}

// The supervisor ignores SIGPIPE; the command must not inherit that (exec keeps what is
// ignored), or `yes | head -1` in a sandbox fails with EPIPE where it ends quietly elsewhere.
TEST_F(RootLaneTest, TheCommandStartsWithNoSignalIgnored) {
  for (const char* egress : {"none", "open"}) {
    CliResult r = Run({"--egress", egress}, {"/bin/grep", "SigIgn", "/proc/self/status"});
    EXPECT_EQ(r.code(), 0) << Describe(r);
    EXPECT_THAT(r.output, HasSubstr("SigIgn:\t0000000000000000\n")) << egress;
  }
  CliResult yes = Run({}, {"/bin/sh", "-c", "yes | head -1 >/dev/null; echo done"});
  EXPECT_EQ(yes.code(), 0) << Describe(yes);
  EXPECT_THAT(yes.output, Not(HasSubstr("Broken pipe")));
}

TEST_F(RootLaneTest, ExitCodesAndSignalsPropagate) {
  CliResult seven = Run({}, {"/bin/sh", "-c", "exit 7"});
  EXPECT_EQ(seven.code(), 7) << Describe(seven);
  EXPECT_EQ(LatestRecord(install_)["exit_code"], 7);

  CliResult term = Run({}, {"/bin/sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(term.code(), 128 + 15) << Describe(term);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["signal"], 15) << rec.dump();
  EXPECT_TRUE(rec["exit_code"].is_null());

  // A command that exits 143 by itself is not a signal death.
  CliResult plain = Run({}, {"/bin/sh", "-c", "exit 143"});
  EXPECT_EQ(plain.code(), 143);
  EXPECT_TRUE(LatestRecord(install_)["signal"].is_null());

  CliResult missing = Run({}, {"no-such-command-here"});
  EXPECT_EQ(missing.code(), 127) << Describe(missing);
  std::string data = install_.workspace() + "/not-executable";
  ASSERT_TRUE(WriteFileAtomically(data, "echo should-not-run\n", 0644).ok());
  CliResult not_exec = Run({}, {data});
  EXPECT_EQ(not_exec.code(), 126) << Describe(not_exec);
}

TEST_F(RootLaneTest, BadAllowlistEntryIsRefusedBeforeAnythingRuns) {
  CliResult r = Run({"--egress", "allowlist", "--allow", "exa mple.com"}, {"/bin/true"});
  EXPECT_EQ(r.code(), 125);
  EXPECT_THAT(r.output, HasSubstr("allowlist entry \"exa mple.com\": invalid host name"));
  CliResult empty = Run({"--egress", "allowlist"}, {"/bin/true"});
  EXPECT_EQ(empty.code(), 125);
  EXPECT_THAT(empty.output, HasSubstr("needs at least one --allow"));
}

TEST_F(RootLaneTest, TimeoutKillsTheWholeSandbox) {
  MarkerProcess unique;  // only for its unique number; the sandbox starts its own sleeps
  std::string m = unique.marker() + "1";
  CliResult r = Run({"--timeout", "1"},
                    {"/bin/sh", "-c", fmt::format("sleep {0} & (sleep {0} &) ; sleep {0}", m)});
  EXPECT_THAT(r.code(), ::testing::AnyOf(128 + 15, 128 + 9)) << Describe(r);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "cancelled") << rec.dump();
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("timeout"));
  EXPECT_THAT(ProcessesMatching(m), ::testing::IsEmpty()) << "a sandboxed process survived";
}

// The foreground run's supervisor is forked, not exec'd, from a `codespace run` that may sit on
// a terminal: it must leave that terminal and the caller's session behind (a Ctrl-C or a hangup
// there is the caller's to handle: it cancels the run), be named cs-supervisor, and hold
// nothing of the caller's (the caller's store descriptors above all). The caller here has a
// pseudo-terminal as its controlling terminal, as in an interactive shell.
TEST_F(RootLaneTest, ForkedSupervisorLeavesTheCallersTerminalAndHoldsNothingOfTheCallers) {
  MarkerProcess unique;
  std::string m = unique.marker() + "2";
  std::vector<std::string> args = {
      install_.codespace(), "run", "--workspace", install_.workspace(), "--timeout", "60", "--",
      "/bin/sleep",         m};
  std::vector<std::string> env = CodespaceEnvironment(install_);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int master = -1;
  pid_t cli = ::forkpty(&master, nullptr, nullptr, nullptr);  // setsid + the pty as its terminal
  ASSERT_GE(cli, 0) << "forkpty: " << ErrnoText(errno);
  if (cli == 0) {
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  UniqueFd master_fd(master);
  std::string output;
  std::thread drain([&] {  // until the terminal's last user is gone (EIO)
    char buf[4096];
    for (ssize_t n;
         (n = ::read(master_fd.get(), buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR);)
      if (n > 0) output.append(buf, static_cast<size_t>(n));
  });
  std::string sup_file;
  for (int i = 0; i < 500 && sup_file.empty(); ++i) {
    for (const std::string& id : install_.RunIds()) {
      RunDir dir = RunDirFor(install_.state_dir(), id);
      if (::access(dir.sandbox_path().c_str(), F_OK) == 0) sup_file = dir.supervisor_path();
    }
    if (sup_file.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_t sup = 0;
  if (!sup_file.empty()) sup = std::atoi(ReadFileToString(sup_file).value_or("0").c_str());
  EXPECT_GT(sup, 0) << "no supervisor identity";
  if (sup > 0) {
    constexpr int kTtyNr = 7;  // proc(5): the controlling terminal, 0 for none
    ASSERT_GT(std::atol(ProcStatField(cli, kTtyNr).c_str()), 0)
        << "the caller has no terminal: the test proves nothing";
    EXPECT_EQ(ProcStatField(sup, kTtyNr), "0") << "the supervisor kept the caller's terminal";
    EXPECT_EQ(ReadFileToString(fmt::format("/proc/{}/comm", sup)).value_or(""), "cs-supervisor\n");
    EXPECT_NE(::getsid(sup), ::getsid(cli)) << "in the caller's session";
    std::string fd_dir = fmt::format("/proc/{}/fd", sup);
    if (DIR* d = ::opendir(fd_dir.c_str())) {
      while (dirent* e = ::readdir(d)) {
        char target[512] = {};
        ssize_t n = ::readlink((fd_dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
        if (n > 0) {
          EXPECT_THAT(std::string(target), Not(HasSubstr("codespace.db"))) << e->d_name;
          EXPECT_THAT(std::string(target), Not(HasSubstr("/dev/pts/"))) << e->d_name;
        }
      }
      ::closedir(d);
    }
  }
  for (pid_t p : ProcessesMatching(m)) {
    if (ReadFileToString(fmt::format("/proc/{}/comm", p)).value_or("") == "sleep\n") {
      ::kill(p, SIGKILL);
    }
  }
  int st = 0;
  while (::waitpid(cli, &st, 0) < 0 && errno == EINTR) {
  }
  drain.join();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 128 + 9) << "status " << st << ": " << output;
}

// Waits up to `wait` for every process whose command line holds `marker` to be gone, then
// kills whatever is not (the machine is left clean either way) and fails naming it.
void ExpectAllGone(const std::string& marker, const std::string& what,
                   std::chrono::milliseconds wait = std::chrono::seconds(2)) {
  for (auto end = std::chrono::steady_clock::now() + wait;
       !ProcessesMatching(marker).empty() && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string which;
  for (pid_t p : ProcessesMatching(marker)) {
    which += fmt::format("\n  {} {}", p,
                         ReadFileToString(fmt::format("/proc/{}/cmdline", p)).value_or(""));
    ::kill(p, SIGKILL);
  }
  EXPECT_TRUE(which.empty()) << what << which;
}

// A supervisor SIGKILLed at any moment of the sandbox's setup leaves nothing running: not
// bubblewrap, not its child (which waits on an eventfd for bubblewrap's word and would wait
// forever were bubblewrap killed before giving it), not the command. The real bubblewrap,
// killed at delays spread over the launch, 40 times.
TEST_F(RootLaneTest, SupervisorKilledAtAnyPointOfSandboxSetupLeavesNothingRunning) {
  CliResult warm = Run({}, {"/bin/true"});  // remembered probes: every try goes straight to launch
  ASSERT_EQ(warm.code(), 0) << Describe(warm);
  MarkerProcess unique;
  const std::string m = unique.marker() + "4";
  constexpr int kTries = 40;
  for (int i = 0; i < kTries; ++i) {
    const std::set<std::string> before = install_.RunIds();
    CliResult r;
    std::thread cli([&] { r = Run({}, {"/bin/sh", "-c", "exec sleep " + m}); });
    pid_t sup = 0;
    for (int w = 0; w < 20000 && sup == 0; ++w) {
      sup = NewSupervisor(install_, before);
      if (sup == 0) std::this_thread::sleep_for(std::chrono::microseconds(250));
    }
    EXPECT_GT(sup, 0) << "no supervisor on try " << i;
    // 0 to ~10 ms after the supervisor wrote its identity: before, during and after bubblewrap.
    std::this_thread::sleep_for(std::chrono::microseconds(250 * i));
    if (sup > 0) ::kill(sup, SIGKILL);
    cli.join();
    EXPECT_NE(r.code(), 0) << "try " << i << ": " << Describe(r);
    // Recorded by the CLI that watched it, there and then: never left "running".
    auto rec = LatestRecord(install_);
    EXPECT_EQ(rec["state"], "lost") << "try " << i << ": " << rec.dump();
  }
  // What is left unwinds by itself (bubblewrap finishing, codespace-init finding no reader).
  ExpectAllGone(m, "left running:", std::chrono::seconds(5));
}

// A run stopped (here at its timeout) while bubblewrap is still setting up: bubblewrap is
// killed with its child, which waits on it. A stand-in bubblewrap of the same shape (a parent
// waiting on a child that never ends), planted in the remembered probes, holds the run there.
TEST_F(RootLaneTest, RunStoppedDuringSandboxSetupKillsBubblewrapAndItsChild) {
  MarkerProcess unique;
  const std::string m = unique.marker() + "3";
  ASSERT_NO_FATAL_FAILURE(
      PlantBubblewrap("stuck-bwrap", fmt::format("#!/bin/sh\n/bin/sleep {} &\nwait\n", m)));

  CliResult r = RunCodespace(
      install_,
      {"run", "--workspace", install_.workspace(), "--timeout", "1", "--", "/bin/true"},
      {{"CODESPACE_STOP_GRACE_MS", "100"}});
  EXPECT_NE(r.code(), 0) << Describe(r);
  auto rec = LatestRecord(install_);
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("timeout")) << rec.dump();
  ExpectAllGone(m, "bubblewrap's child outlived it:");
}

// A supervisor SIGKILLed in bubblewrap's last microseconds of setup (--die-with-parent armed,
// its child not yet told to go on) strands that child: it waits forever for bubblewrap's word,
// reparented away. Whoever records the run lost finds it by the run id in its environment and
// kills it. A stand-in holds the real bubblewrap exactly there (StartRunHeldInBubblewrapSetup).
TEST_F(RootLaneTest, BubblewrapChildStrandedByADeadSupervisorIsKilledWhenTheRunIsLost) {
  MarkerProcess unique;
  const std::string m = unique.marker() + "6";
  std::thread cli;
  CliResult r;
  pid_t sup = 0;
  StartRunHeldInBubblewrapSetup(m, &cli, &r, &sup);
  if (sup > 0) ::kill(sup, SIGKILL);
  if (cli.joinable()) cli.join();
  ASSERT_GT(sup, 0);
  EXPECT_NE(r.code(), 0) << Describe(r);
  EXPECT_EQ(LatestRecord(install_)["state"], "lost") << LatestRecord(install_).dump();
  ExpectAllGone(m, "the stranded child was left:");
}

// bubblewrap SIGKILLed from outside (an operator, the OOM killer) in its last steps of setup,
// its child not yet told to go on: that child, reparented to the supervisor (a subreaper),
// would wait forever. The supervisor kills what bubblewrap left, and the run ends recorded.
// The same stand-in as above holds bubblewrap there.
TEST_F(RootLaneTest, BubblewrapKilledDuringSetupLeavesNoChildWaitingForIt) {
  MarkerProcess unique;
  const std::string m = unique.marker() + "7";
  std::thread cli;
  CliResult r;
  pid_t sup = 0;
  StartRunHeldInBubblewrapSetup(m, &cli, &r, &sup);
  pid_t outer = 0;  // bubblewrap itself: the supervisor's child; the other is its child
  for (pid_t p : Bubblewraps(m)) {
    if (sup > 0 && ProcStatField(p, 4) == std::to_string(sup)) outer = p;
  }
  if (outer > 0) ::kill(outer, SIGKILL);
  if (outer <= 0 && sup > 0) ::kill(sup, SIGKILL);  // the run must end either way
  if (cli.joinable()) cli.join();
  ASSERT_GT(outer, 0);
  EXPECT_NE(r.code(), 0) << Describe(r);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "aborted") << rec.dump();
  EXPECT_THAT(rec["reason"].get<std::string>(),
              HasSubstr("bubblewrap killed by signal 9 (Killed) before the command started"))
      << rec.dump();
  ExpectAllGone(m, "bubblewrap's child was left waiting:");
}

// A process outside the sandbox that holds the run's stdout (handed over a unix socket) never
// closes it. The run still ends, a drain grace after its sandbox is gone, and the record says
// the log was cut there.
TEST_F(RootLaneTest, OutputHeldOpenOutsideTheSandboxEndsTheRunAfterTheGrace) {
  MarkerProcess unique;
  const std::string m = unique.marker() + "5";
  const std::string sock = install_.workspace() + "/hold.sock";
  SpawnOptions ho;
  ho.argv = {"/usr/bin/python3", "-c",
             "import socket, sys, time\n"
             "s = socket.socket(socket.AF_UNIX)\n"
             "s.bind(sys.argv[1]); s.listen(1)\n"
             "print('ready', flush=True)\n"
             "c, _ = s.accept()\n"
             "msg, fds, _, _ = socket.recv_fds(c, 16, 4)\n"
             "time.sleep(600)\n",
             sock, m};
  auto ready = MakePipe();
  ASSERT_TRUE(ready.ok());
  ho.fds = {{ready->write.get(), 1}};
  auto holder = Spawn(ho);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  ready->write.reset();
  char b[8] = {};
  ASSERT_GT(::read(ready->read.get(), b, sizeof(b)), 0) << "the holder did not start";

  std::atomic<bool> done{false};
  CliResult r;
  std::thread cli([&] {
    r = RunCodespace(install_,
                     {"run", "--workspace", install_.workspace(), "--egress", "none", "--",
                      "/usr/bin/python3", "-c",
                      "import socket\n"
                      "s = socket.socket(socket.AF_UNIX)\n"
                      "s.connect('hold.sock')\n"
                      "socket.send_fds(s, [b'x'], [1])\n"
                      "print('handed over', flush=True)\n"},
                     {{"CODESPACE_DRAIN_GRACE_MS", "300"}});
    done = true;
  });
  for (int i = 0; i < 1500 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(done) << "the run did not end while its stdout was held open outside";
  holder->Signal(SIGKILL).IgnoreError();  // lets a run that waits on it end
  cli.join();
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("handed over"));
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("stdout was still held open")) << rec.dump();
}

}  // namespace
}  // namespace codespace::lanes
