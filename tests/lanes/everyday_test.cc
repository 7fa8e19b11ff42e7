// Everyday use (issue 20), with the real binary: stdin passed through with -i (and /dev/null
// without), stopped runs recorded with what the command really did, a foreground run whose CLI
// was SIGKILLed recorded ended by its own supervisor, and the CLI's commands for ending and
// waiting.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/file_util.h"
#include "base/process.h"
#include "lanes/lane_test_util.h"
#include "store/sqlite_run_store.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

class EverydayLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
  }
  void TearDown() override {
    install_.WaitForSupervisors(std::chrono::seconds(10));
    KillProcessesMatching(install_.state_dir());
  }
  // `codespace ARGS...` with `input` on its stdin (a pipe, closed after writing).
  CliResult RunWithStdin(const std::vector<std::string>& args, const std::string& input,
                         const std::map<std::string, std::string>& env = {}) {
    auto in = MakePipe();
    auto out = MakePipe();
    if (!in.ok() || !out.ok()) return {ExitStatus::Exited(255), "pipe failed"};
    SpawnOptions o;
    o.argv = {install_.codespace()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = CodespaceEnvironment(install_, env);
    o.fds = {{in->read.get(), 0}, {out->write.get(), 1}, {out->write.get(), 2}};
    auto child = Spawn(o);
    in->read.reset();
    out->write.reset();
    if (!child.ok()) return {ExitStatus::Exited(255), child.status().message()};
    WriteAll(in->write.get(), input).IgnoreError();
    in->write.reset();
    auto text = ReadAll(out->read.get());
    auto st = child->Wait();
    return {st.ok() ? *st : ExitStatus::Exited(255), text.ok() ? *text : ""};
  }
  std::vector<std::string> RunArgs(std::vector<std::string> flags,
                                   const std::vector<std::string>& cmd) {
    std::vector<std::string> a = {"-q", "run", "--workspace", install_.workspace()};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return a;
  }

  // `codespace ARGS...` in the background (its output to /dev/null).
  ChildProcess Background(const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& env = {}) {
    SpawnOptions o;
    o.argv = {install_.codespace()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = CodespaceEnvironment(install_, env);
    auto child = Spawn(o);
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    return child.ok() ? std::move(*child) : ChildProcess();
  }
  // The one run's id once its supervisor has written its identity (up to 20 s).
  std::string WaitForSupervisedRun() {
    auto until = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < until) {
      auto ids = install_.RunIds();
      if (ids.size() == 1 &&
          ::access((install_.state_dir() + "/runs/" + *ids.begin() + "/sandbox").c_str(), F_OK) ==
              0) {
        return *ids.begin();
      }
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "no run got a running sandbox";
    return "";
  }
  // The id of a run other than `other` once its sandbox runs (up to 20 s).
  std::string WaitForSupervisedRun2(const std::string& other) {
    auto until = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < until) {
      for (const auto& id : install_.RunIds()) {
        if (id != other &&
            ::access((install_.state_dir() + "/runs/" + id + "/sandbox").c_str(), F_OK) == 0) {
          return id;
        }
      }
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "no second run got a running sandbox";
    return "";
  }
  // The run id a submit printed (its stdout line; stderr may come first in `output`).
  static std::string IdIn(const std::string& output) {
    for (size_t at = 0; at < output.size();) {
      size_t nl = output.find('\n', at);
      std::string line = output.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      if (IsValidRunId(line)) return line;
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
    return "";
  }
  // Until the worker's API socket exists (20 s at most).
  void WaitForWorkerSocket() {
    auto until = std::chrono::steady_clock::now() + 20s;
    while (::access((install_.state_dir() + "/api.sock").c_str(), F_OK) != 0 &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(20ms);
    }
  }
  // The record straight from the store (no codespace command, which might record it itself),
  // once it is no longer running (up to `limit`).
  RunRecord WaitEndedInStore(const std::string& id, std::chrono::seconds limit = 20s) {
    auto until = std::chrono::steady_clock::now() + limit;
    RunRecord last;
    while (std::chrono::steady_clock::now() < until) {
      auto store = SqliteRunStore::Open(install_.state_dir() + "/codespace.db");
      if (store.ok()) {
        if (auto r = (*store)->Get(id); r.ok()) {
          last = *r;
          if (r->state != RunState::kRunning && r->state != RunState::kQueued) return last;
        }
      }
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "run " << id << " still " << RunStateName(last.state);
    return last;
  }

  StagedInstall install_{0};
};

TEST_F(EverydayLaneTest, DashIPassesStdinToTheCommand) {
  CliResult r = RunWithStdin(RunArgs({"-i"}, {"/bin/cat"}), "x\n");
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_EQ(r.output, "x\n") << Describe(r);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["logs"]["stdout"]["bytes"], 2) << rec.dump();  // captured in the log too
}

TEST_F(EverydayLaneTest, WithoutDashIStdinIsDevNull) {
  // The control: the same pipe, no -i. cat reads /dev/null: nothing, exit 0.
  CliResult r = RunWithStdin(
      RunArgs({}, {"/bin/sh", "-c", "cat; test \"$(readlink /proc/self/fd/0)\" = /dev/null"}),
      "x\n");
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, Not(HasSubstr("x"))) << Describe(r);
}

TEST_F(EverydayLaneTest, CommandThatExitsInTheStopGraceKeepsItsOwnStatus) {
  CliResult r =
      RunCodespace(install_,
                   RunArgs({"--timeout", "1"},
                           {"/bin/sh", "-c", "trap 'exit 3' TERM; while :; do sleep 0.1; done"}),
                   {{"CODESPACE_STOP_GRACE_MS", "20000"}});
  EXPECT_EQ(r.code(), 3) << Describe(r);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "cancelled") << rec.dump();
  EXPECT_EQ(rec["exit_code"], 3) << rec.dump();
  EXPECT_TRUE(rec["signal"].is_null()) << rec.dump();
  std::string reason = rec["reason"].get<std::string>();
  EXPECT_THAT(reason, HasSubstr("timeout"));
  EXPECT_THAT(reason, HasSubstr("SIGTERM was sent and the command exited with status 3"));
  EXPECT_THAT(reason, Not(HasSubstr("SIGKILL")));
}

TEST_F(EverydayLaneTest, CommandThatIgnoresSigtermIsRecordedKilled) {
  // The other side: a command still running at the grace's end is SIGKILLed, and says so.
  CliResult r = RunCodespace(
      install_,
      RunArgs({"--timeout", "1"}, {"/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"}),
      {{"CODESPACE_STOP_GRACE_MS", "300"}});
  EXPECT_EQ(r.code(), 128 + 9) << Describe(r);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "cancelled") << rec.dump();
  EXPECT_EQ(rec["signal"], 9) << rec.dump();
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("SIGKILL after 300 ms"));
}

TEST_F(EverydayLaneTest, ForegroundRunWhoseCliIsKilledIsRecordedByItsSupervisor) {
  ChildProcess cli = Background(RunArgs({}, {"/bin/sh", "-c", "sleep 1; echo done"}));
  std::string id = WaitForSupervisedRun();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(cli.Signal(SIGKILL).ok());
  cli.Wait().status().IgnoreError();
  // No worker, and no codespace command looks: only the supervisor can record it.
  RunRecord r = WaitEndedInStore(id);
  EXPECT_EQ(r.state, RunState::kExited);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.stdout_log.sealed);
  EXPECT_EQ(r.stdout_log.bytes, 5u);  // "done\n"
}

TEST_F(EverydayLaneTest, WorkerRecordsALostForegroundRunWithoutRestarting) {
  ChildProcess worker = Background({"-q", "worker"}, {{"CODESPACE_WORKER_POLL_MS", "50"}});
  WaitForWorkerSocket();
  // The worker is past its start-up look at runs in flight once it has run one of its own: the
  // foreground run below is then found only by its periodic look.
  CliResult first =
      RunCodespace(install_, {"-q", "submit", "--workspace", install_.workspace(), "--", "true"});
  ASSERT_EQ(first.code(), 0) << Describe(first);
  CliResult ran = RunCodespace(install_, {"wait", IdIn(first.output)});
  ASSERT_EQ(ran.code(), 0) << Describe(ran);
  ChildProcess cli = Background(RunArgs({}, {"/bin/sleep", "60"}));
  std::string id = WaitForSupervisedRun2(IdIn(first.output));
  ASSERT_FALSE(id.empty());
  // The CLI and then the supervisor die: nobody is left to write status.json.
  ASSERT_TRUE(cli.Signal(SIGKILL).ok());
  cli.Wait().status().IgnoreError();
  auto sup = ReadFileToString(install_.state_dir() + "/runs/" + id + "/supervisor");
  ASSERT_TRUE(sup.ok());
  ASSERT_EQ(::kill(std::atoi(sup->c_str()), SIGKILL), 0);
  // The worker started before the run and is not restarted: its periodic look finds it.
  RunRecord r = WaitEndedInStore(id);
  EXPECT_EQ(r.state, RunState::kLost);
  EXPECT_THAT(r.reason, HasSubstr("died without reporting"));
  worker.Signal(SIGTERM).IgnoreError();
  worker.Wait().status().IgnoreError();
}

// `codespace run -it` on a real pseudo-terminal, as a user at a terminal would: the command sees
// a terminal of the user's size, what is typed reaches it, a resize reaches it, Ctrl-C signals
// the command (which traps it and exits 7) and not codespace, and the user's terminal is in raw
// mode during the run and exactly as before after it.
TEST_F(EverydayLaneTest, DashItGivesTheCommandATerminal) {
  int master = -1, slave = -1;
  winsize ws{};
  ws.ws_row = 40;
  ws.ws_col = 100;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, &ws), 0) << ErrnoText(errno);
  UniqueFd m(master), sl(slave);
  termios before{};
  ASSERT_EQ(::tcgetattr(slave, &before), 0);
  ASSERT_TRUE(before.c_lflag & ICANON) << "a fresh pty starts cooked";
  const std::string script =
      "stty size; echo ready; "
      "while [ \"$(stty size)\" = '40 100' ]; do sleep 0.05; done; echo \"resized $(stty size)\"; "
      "read line; echo \"got:$line\"; "
      "trap 'echo sigint; exit 7' INT; echo armed; while :; do sleep 0.1; done";
  std::vector<std::string> args = {install_.codespace(), "-q", "run",     "-it", "--workspace",
                                   install_.workspace(), "--", "/bin/sh", "-c",  script};
  std::vector<std::string> env = CodespaceEnvironment(install_);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setsid();
    ::ioctl(slave, TIOCSCTTY, 0);
    for (int fd = 0; fd < 3; ++fd) ::dup2(slave, fd);
    std::vector<char*> av, ev;
    for (auto& a : args) av.push_back(a.data());
    for (auto& e : env) ev.push_back(e.data());
    av.push_back(nullptr);
    ev.push_back(nullptr);
    ::execve(av[0], av.data(), ev.data());
    ::_exit(127);
  }
  std::string seen;
  // Reads the terminal until `want` has appeared (30 s at most: a bound, not a timing).
  auto wait_for = [&](const std::string& want) {
    auto until = std::chrono::steady_clock::now() + 30s;
    while (seen.find(want) == std::string::npos && std::chrono::steady_clock::now() < until) {
      pollfd p{master, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(master, buf, sizeof(buf));
      if (n <= 0) break;
      seen.append(buf, static_cast<size_t>(n));
    }
    return seen.find(want) != std::string::npos;
  };
  EXPECT_TRUE(wait_for("ready")) << seen;
  EXPECT_THAT(seen, HasSubstr("40 100")) << "the command's terminal has the user's size";
  termios during{};
  ASSERT_EQ(::tcgetattr(slave, &during), 0);
  EXPECT_FALSE(during.c_lflag & ICANON) << "the user's terminal is raw while the run has it";
  EXPECT_FALSE(during.c_lflag & ISIG) << "so Ctrl-C is a byte for the command, not codespace";
  ws.ws_row = 50;
  ws.ws_col = 120;
  ASSERT_EQ(::ioctl(master, TIOCSWINSZ, &ws), 0);  // the kernel sends the CLI SIGWINCH
  EXPECT_TRUE(wait_for("resized 50 120")) << seen;
  ASSERT_EQ(::write(master, "hello\r", 6), 6);
  EXPECT_TRUE(wait_for("got:hello")) << seen;
  EXPECT_TRUE(wait_for("armed")) << seen;
  ASSERT_EQ(::write(master, "\x03", 1), 1);  // Ctrl-C
  EXPECT_TRUE(wait_for("sigint")) << seen;
  int status = 0;
  auto until = std::chrono::steady_clock::now() + 30s;
  pid_t got = 0;
  while ((got = ::waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < until) {
    // Keep draining the terminal, so that the CLI never blocks writing to it.
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      char buf[4096];
      ssize_t n = ::read(master, buf, sizeof(buf));
      if (n > 0) seen.append(buf, static_cast<size_t>(n));
    }
  }
  if (got == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "codespace run -it did not end: " << seen;
  }
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 7) << "the command's own exit, after its SIGINT trap: " << seen;
  termios after{};
  ASSERT_EQ(::tcgetattr(slave, &after), 0);
  EXPECT_EQ(after.c_lflag, before.c_lflag) << "the user's terminal is restored";
  EXPECT_EQ(after.c_iflag, before.c_iflag);
  EXPECT_EQ(after.c_oflag, before.c_oflag);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_EQ(rec["exit_code"], 7) << rec.dump();
  EXPECT_GT(rec["logs"]["stdout"]["bytes"].get<int>(), 0) << "the output is in the run's log";
}

// What the CLI says when it is used wrong, and the small conveniences: a table of commands,
// their exit code and what the output must (and must not) say.
TEST_F(EverydayLaneTest, CliSaysWhatToDo) {
  struct Case {
    std::vector<std::string> args;
    int code;
    std::vector<std::string> says;
    std::vector<std::string> never = {};
  };
  const std::string ws = install_.workspace();
  const std::vector<Case> cases = {
      {{"run", "--frobnicate", "--", "true"},
       125,
       {"unknown flag --frobnicate", "see `codespace run --help`"},
       {"-- --frobnicate"}},
      {{"frob"}, 125, {"unknown command \"frob\"", "see `codespace --help`"}},
      {{}, 125, {"a command is required", "see `codespace --help`"}},
      {{"rm"}, 125, {"codespace rm", "see `codespace rm --help`"}, {"A subcommand is required"}},
      {{"run", "--timeout", "-1", "--", "true"},
       125,
       {"--timeout: takes whole seconds from 0 (no timeout) to 31536000"},
       {"17976931348623157"}},
      {{"--version"}, 0, {"codespace 0."}},
      {{"plan", "--allow", "203.0.113.7"}, -1, {"plan: "}, {"only for the allowlist policy"}},
      {{"plan", "--egress", "none", "--allow", "203.0.113.7"},
       125,
       {"--allow entries are only for the allowlist policy"}},
      {{"plan", "--allow", "*.co.uk"}, 125, {"\"co.uk\" is a public suffix"}},
      {{"run", "--allow", "*.com", "--workspace", ws, "--", "true"},
       125,
       {"\"com\" is a public suffix"}},
      {{"plan", "--json", "--egress", "none"}, 0, {"\"plan\":\"severed\""}},
      {{"posture", "--json"}, 0, {"\"line\":", "\"confines\":"}},
      {{"run", "-q", "--workspace", ws, "-e", "A=1", "--", "/bin/sh", "-c", "echo $A"}, 0, {"1\n"}},
      {{"show", "nosuchname"}, 125, {"no run with id or name \"nosuchname\""}},
      {{"run", "--broker", "127.0.0.1:9", "--workspace", ws, "--", "true"},
       -1,
       {"CODESPACE_BROKER_URL", "--broker-env"}},
  };
  for (const Case& c : cases) {
    CliResult r = RunCodespace(install_, c.args);
    std::string what = ::testing::PrintToString(c.args);
    if (c.code >= 0) {
      EXPECT_EQ(r.code(), c.code) << what << ": " << Describe(r);
    }
    for (const auto& want : c.says) EXPECT_THAT(r.output, HasSubstr(want)) << what;
    for (const auto& not_this : c.never) EXPECT_THAT(r.output, Not(HasSubstr(not_this))) << what;
  }
}

TEST_F(EverydayLaneTest, GlobalFlagsGoBeforeOrAfterTheSubcommand) {
  // --quiet after `submit` (it used to be refused), and --json after `show`.
  CliResult submitted = RunCodespace(install_, {"submit", "--quiet", "--name", "late-flags",
                                                "--workspace", install_.workspace(), "--", "true"});
  EXPECT_EQ(submitted.code(), 0) << Describe(submitted);
  // No worker serves this state dir: said on stderr, exit 0 still.
  EXPECT_THAT(submitted.output, HasSubstr("no worker answers on " + install_.state_dir()));
  CliResult shown = RunCodespace(install_, {"show", "late-flags", "--json"});
  EXPECT_EQ(shown.code(), 0) << Describe(shown);
  auto j = nlohmann::json::parse(shown.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << shown.output;
  EXPECT_EQ(j["name"], "late-flags");
  EXPECT_EQ(j["state"], "queued");
  // `wait` of that queued run with no worker says so (and is then stopped here).
  ChildProcess waiter;
  {
    auto out = MakePipe();
    ASSERT_TRUE(out.ok());
    SpawnOptions o;
    o.argv = {install_.codespace(), "wait", "late-flags"};
    o.env = CodespaceEnvironment(install_);
    o.fds = {{out->write.get(), 2}};
    auto child = Spawn(o);
    ASSERT_TRUE(child.ok());
    out->write.reset();
    std::string err;
    char buf[512];
    ssize_t n;
    while (err.find("no worker answers") == std::string::npos &&
           (n = ::read(out->read.get(), buf, sizeof(buf))) > 0) {
      err.append(buf, static_cast<size_t>(n));
    }
    EXPECT_THAT(err, HasSubstr("is queued; no worker answers"));
    child->Signal(SIGTERM).IgnoreError();
    child->Wait().status().IgnoreError();
  }
}

TEST_F(EverydayLaneTest, WaitExitsWithTheRunsStatus) {
  ChildProcess worker = Background({"-q", "worker"});
  WaitForWorkerSocket();
  CliResult submitted = RunCodespace(install_, {"-q", "submit", "--workspace", install_.workspace(),
                                                "--", "/bin/sh", "-c", "exit 4"});
  ASSERT_EQ(submitted.code(), 0) << Describe(submitted);
  std::string id = IdIn(submitted.output);
  ASSERT_FALSE(id.empty()) << submitted.output;
  CliResult waited = RunCodespace(install_, {"wait", id});
  EXPECT_EQ(waited.code(), 4) << Describe(waited);
  CliResult latest = RunCodespace(install_, {"wait", "latest", "--json"});
  EXPECT_EQ(latest.code(), 4) << Describe(latest);
  EXPECT_THAT(latest.output, HasSubstr("\"exit_code\":4"));
  worker.Signal(SIGTERM).IgnoreError();
  worker.Wait().status().IgnoreError();
}

TEST_F(EverydayLaneTest, RmAndPruneNeverTouchARunInFlight) {
  CliResult done = RunCodespace(install_, RunArgs({"--name", "done"}, {"true"}));
  ASSERT_EQ(done.code(), 0) << Describe(done);
  std::string done_id = LatestRecord(install_)["id"];
  ChildProcess cli = Background(RunArgs({"--name", "inflight"}, {"/bin/sleep", "60"}));
  std::string running = WaitForSupervisedRun2(done_id);
  ASSERT_FALSE(running.empty());
  // rm of the running run: refused, record and logs kept.
  CliResult rm_running = RunCodespace(install_, {"rm", "inflight"});
  EXPECT_EQ(rm_running.code(), 125) << Describe(rm_running);
  EXPECT_THAT(rm_running.output, HasSubstr("never removed"));
  // prune of everything (age 0): the ended run goes, the running one stays.
  CliResult pruned = RunCodespace(install_, {"prune", "--older-than", "0s"});
  EXPECT_EQ(pruned.code(), 0) << Describe(pruned);
  EXPECT_THAT(pruned.output, HasSubstr("removed 1 run(s)"));
  EXPECT_EQ(RunCodespace(install_, {"show", done_id}).code(), 125);
  EXPECT_FALSE(::access((install_.state_dir() + "/runs/" + done_id).c_str(), F_OK) == 0)
      << "its logs go with its record";
  EXPECT_EQ(RunCodespace(install_, {"show", running}).code(), 0);
  EXPECT_TRUE(::access((install_.state_dir() + "/runs/" + running + "/stdout").c_str(), F_OK) == 0);
  // Once it has ended (cancelled), rm removes it.
  EXPECT_EQ(RunCodespace(install_, {"cancel", "inflight"}).code(), 0);
  cli.Wait().status().IgnoreError();
  install_.WaitForSupervisors(std::chrono::seconds(20));
  CliResult rm_ended = RunCodespace(install_, {"rm", running});
  EXPECT_EQ(rm_ended.code(), 0) << Describe(rm_ended);
  EXPECT_EQ(RunCodespace(install_, {"show", running}).code(), 125);
}

// Submitting exactly once. The same key twice → one run, the first one's id both times, through
// the worker and through the store alike; and a submit whose worker is killed while it waits for
// the answer asks again with the same key (here: of the store, no worker being left) and ends
// with exactly one run.
TEST_F(EverydayLaneTest, SubmitWithAKeyCreatesOneRun) {
  auto submit = [&](const std::string& key) {
    return RunCodespace(install_, {"-q", "submit", "--idempotency-key", key, "--workspace",
                                   install_.workspace(), "--", "/bin/echo", "once"});
  };
  auto runs_with_key = [&](const std::string& key) {
    auto store = SqliteRunStore::Open(install_.state_dir() + "/codespace.db");
    EXPECT_TRUE(store.ok());
    RunListOptions all;
    all.limit = 1000;
    auto runs = (*store)->List(all);
    int n = 0;
    for (const auto& r : *runs) n += r.idempotency_key == key;
    return n;
  };
  // No worker: the store path.
  CliResult a = submit("key-store");
  CliResult b = submit("key-store");
  ASSERT_EQ(a.code(), 0) << Describe(a);
  ASSERT_EQ(b.code(), 0) << Describe(b);
  ASSERT_FALSE(IdIn(a.output).empty()) << a.output;
  EXPECT_EQ(IdIn(a.output), IdIn(b.output));
  EXPECT_EQ(runs_with_key("key-store"), 1);
  // Through a worker.
  ChildProcess worker = Background({"-q", "worker"});
  auto until = std::chrono::steady_clock::now() + 20s;
  while (::access((install_.state_dir() + "/api.sock").c_str(), F_OK) != 0 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  CliResult c = submit("key-api");
  CliResult d = submit("key-api");
  ASSERT_EQ(c.code(), 0) << Describe(c);
  ASSERT_FALSE(IdIn(c.output).empty()) << c.output;
  EXPECT_EQ(IdIn(c.output), IdIn(d.output));
  EXPECT_EQ(runs_with_key("key-api"), 1);
  // The worker stopped (SIGSTOP: its socket still accepts, nothing answers), a submit sent to
  // it, then the worker killed: the submit's answer is lost and it asks again, same key.
  ASSERT_EQ(RunCodespace(install_, {"wait", IdIn(c.output)}).code(), 0);
  ASSERT_TRUE(worker.Signal(SIGSTOP).ok());
  auto out = MakePipe();
  ASSERT_TRUE(out.ok());
  SpawnOptions o;
  o.argv = {install_.codespace(),
            "-q",
            "submit",
            "--idempotency-key",
            "key-lost",
            "--workspace",
            install_.workspace(),
            "--",
            "/bin/echo",
            "once"};
  o.env = CodespaceEnvironment(install_);
  o.fds = {{out->write.get(), 1}, {out->write.get(), 2}};
  auto submitter = Spawn(o);
  ASSERT_TRUE(submitter.ok());
  out->write.reset();
  // Until the submit waits for the answer on the worker's socket (its kernel wait channel).
  auto waiting = std::chrono::steady_clock::now() + 20s;
  bool blocked = false;
  while (!blocked && std::chrono::steady_clock::now() < waiting) {
    auto wchan = ReadFileToString(fmt::format("/proc/{}/wchan", submitter->pid()));
    blocked = wchan.ok() && wchan->find("unix_stream_read") != std::string::npos;
    if (!blocked) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(blocked) << "the submit never waited on the worker's answer";
  ASSERT_TRUE(worker.Signal(SIGKILL).ok());
  worker.Wait().status().IgnoreError();
  auto text = ReadAll(out->read.get());
  auto st = submitter->Wait();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->ShellCode(), 0) << (text.ok() ? *text : "");
  EXPECT_EQ(runs_with_key("key-lost"), 1) << (text.ok() ? *text : "");
  EXPECT_THAT(text.ok() ? *text : "", HasSubstr("asking again with idempotency key key-lost"));
  // And again by hand, as the message says: still the one run.
  CliResult e = submit("key-lost");
  EXPECT_EQ(e.code(), 0) << Describe(e);
  EXPECT_EQ(runs_with_key("key-lost"), 1);
}

// The worker prunes by itself when CODESPACE_PRUNE_AFTER is set (here 0s: everything ended).
TEST_F(EverydayLaneTest, WorkerPrunesByConfiguredAge) {
  CliResult done = RunCodespace(install_, RunArgs({}, {"true"}));
  ASSERT_EQ(done.code(), 0) << Describe(done);
  std::string id = LatestRecord(install_)["id"];
  ChildProcess worker = Background({"-q", "worker"}, {{"CODESPACE_PRUNE_AFTER", "0s"}});
  auto until = std::chrono::steady_clock::now() + 20s;
  while (::access((install_.state_dir() + "/runs/" + id).c_str(), F_OK) == 0 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_NE(::access((install_.state_dir() + "/runs/" + id).c_str(), F_OK), 0);
  EXPECT_EQ(RunCodespace(install_, {"show", id}).code(), 125) << "its record went with its logs";
  worker.Signal(SIGTERM).IgnoreError();
  worker.Wait().status().IgnoreError();
}

}  // namespace
}  // namespace codespace::lanes
