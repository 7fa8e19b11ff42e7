// codespace: the command-line front door.
//
//   codespace posture                     probe the host, print the posture line
//   codespace plan [--egress ...]         the public admission: plan, namespace, reason
//   codespace run [...] -- CMD ARGS...    run in the foreground, exit with the command's status
//   codespace runs | show ID              the records
//
// Exit codes of `run`, like `docker run`: the command's own; 128+N when a signal killed it;
// 125 when codespace itself failed or refused the run; 126 when the command cannot be invoked;
// 127 when it is not found.
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/api_server.h"
#include "api/worker_client.h"
#include "base/file_util.h"
#include "cli/log_follow.h"
#include "cli/record_format.h"
#include "cli/state_dir.h"
#include "config/config_file.h"
#include "plan/admission.h"
#include "posture/host_facts.h"
#include "probe/host_probe.h"
#include "probe/probe_cache.h"
#include "relay/relay.h"
#include "sandbox/launcher.h"
#include "sandbox/run_outcome.h"
#include "store/record_json.h"
#include "store/sqlite_run_store.h"
#include "supervisor/run_dir.h"
#include "supervisor/supervisor.h"
#include "worker/local_runner.h"
#include "worker/namespace_sweep.h"
#include "worker/worker.h"

namespace codespace {
namespace {

struct SpecFlags {
  std::string egress = "none";
  std::vector<std::string> allow;
  std::string workspace;
  std::vector<std::string> env;
  int64_t timeout = 0;
  std::string broker;
  std::vector<std::string> broker_env;
  std::vector<std::string> command;
};

void AddSpecFlags(CLI::App* app, SpecFlags* f, bool with_command) {
  app->add_option("--egress", f->egress, "Egress policy: none | allowlist | open")
      ->default_str("none");
  app->add_option("--allow", f->allow,
                  "Allowlist entry (repeatable): host, *.suffix, IPv4/IPv6 address or CIDR, "
                  "optional :port ([v6]:port)")
      ->allow_extra_args(false);  // one value per --allow, so "--" still starts the command
  if (!with_command) return;
  app->add_option("--workspace", f->workspace,
                  "Directory bound read-write and used as the working directory (default: "
                  "the current directory)");
  app->add_option("--env", f->env, "KEY=VALUE for the run's environment (repeatable)")
      ->allow_extra_args(false);
  app->add_option("--timeout", f->timeout, "Wall-clock timeout in seconds (0: none)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--broker", f->broker,
                  "A broker the run reaches whatever its egress: unix:/path or 127.0.0.1:PORT "
                  "(inside: http://127.0.0.1:<port> in CODESPACE_BROKER_URL)");
  app->add_option("--broker-env", f->broker_env,
                  "Also announce the broker URL in this variable (repeatable), e.g. "
                  "ANTHROPIC_BASE_URL")
      ->allow_extra_args(false);
  app->add_option("command", f->command, "The command and its arguments, after --")->required();
}

Result<RunSpec> SpecFromFlags(const SpecFlags& f) {
  RunSpec spec;
  ASSIGN_OR_RETURN(SandboxEgressPolicy mode, ParseEgressPolicy(f.egress));
  ASSIGN_OR_RETURN(spec.egress, MakeEgressPolicy(mode, f.allow));
  for (const auto& kv : f.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError(fmt::format("--env \"{}\": expected KEY=VALUE", kv));
    }
  }
  spec.env = f.env;
  spec.argv = f.command;
  std::string ws = f.workspace;
  if (ws.empty()) {
    char cwd[4096];
    if (!::getcwd(cwd, sizeof(cwd))) return ErrnoError("getcwd", errno);
    ws = cwd;
  }
  char resolved[4096];
  if (!::realpath(ws.c_str(), resolved)) {
    return ErrnoError(fmt::format("--workspace {}", ws), errno);
  }
  spec.workspace = resolved;
  spec.timeout = std::chrono::seconds(f.timeout);
  if (!f.broker.empty()) {
    auto addr = ParseBrokerAddress(f.broker);
    if (!addr.ok()) return addr.status().WithContext(fmt::format("--broker \"{}\"", f.broker));
    spec.broker.address = f.broker;
    spec.broker.env_names = f.broker_env;
  } else if (!f.broker_env.empty()) {
    return InvalidArgumentError("--broker-env needs --broker");
  }
  return spec;
}

void PrintError(const Status& s) { fmt::print(stderr, "codespace: {}\n", s.message()); }

HostFacts ProbeAndReport(bool quiet) {
  HostFacts facts = ProbeHost(ProbeOptionsFromEnvironment());
  if (!quiet) fmt::print(stderr, "{}\n", PostureLine(facts));
  return facts;
}

Result<std::unique_ptr<SqliteRunStore>> OpenStore(const std::string& state_dir) {
  RETURN_IF_ERROR(MakeDirs(state_dir, 0700));
  return SqliteRunStore::Open(state_dir + "/codespace.db");
}

// --- Through a running worker's API -------------------------------------------------------
// When `codespace worker` serves <state dir>/api.sock, the client commands ask it rather than
// the store (same output); when nothing answers there, they read the store as before.

int PosturePrint(const std::string& line, const std::string& refusal) {
  fmt::print("{}\n", line);
  if (refusal.empty()) return 0;
  fmt::print(stderr, "codespace: {}\n", refusal);
  return kExitCodespaceFailed;
}

template <typename T>
bool ApiFailed(const Result<T>& r) {
  if (r.ok()) return false;
  PrintError(r.status());
  return true;
}

int ApiPosture(api::WorkerClient& api) {
  auto p = api.GetPosture();
  if (ApiFailed(p)) return kExitCodespaceFailed;
  return PosturePrint(p->line, p->refusal);
}

int ApiPlan(api::WorkerClient& api, const RunSpec& spec, bool quiet) {
  if (!quiet) {
    auto p = api.GetPosture();
    if (p.ok()) fmt::print(stderr, "{}\n", p->line);
  }
  auto planned = api.Plan(spec);
  if (ApiFailed(planned)) return kExitCodespaceFailed;
  const Admission& a = planned->admission;
  fmt::print(
      "admitted: {}\nplan: {}\nnetwork: {}\nnamespace: {}\nreason: {}\n", a.admitted ? "yes" : "no",
      PlanName(a.decision.plan), NetworkPostureName(PostureOfPlan(a.decision.plan)),
      a.namespace_name.empty() ? "-" : a.namespace_name + " (for run " + planned->run_id + ")",
      a.reason.empty() ? "-" : a.reason);
  return a.admitted ? 0 : kExitCodespaceFailed;
}

int ExitCodeOf(const RunRecord& r);

int ApiSubmit(api::WorkerClient& api, const RunSpec& spec) {
  auto created = api.Submit(spec);
  if (ApiFailed(created)) return kExitCodespaceFailed;
  fmt::print("{}\n", created->id);
  return created->state == RunState::kRefused ? ExitCodeOf(*created) : 0;
}

int ApiLogs(api::WorkerClient& api, const std::string& id, bool follow) {
  Status s = api.Logs(id, follow, STDOUT_FILENO, STDERR_FILENO);
  if (!s.ok()) PrintError(s);
  return s.ok() ? 0 : kExitCodespaceFailed;
}

int ApiCancel(api::WorkerClient& api, const std::string& id) {
  Status s = api.Cancel(id);
  if (!s.ok()) {
    PrintError(s);
    return kExitCodespaceFailed;
  }
  fmt::print("cancel requested for run {}\n", id);
  return 0;
}

// --- end of the API client side ----------------------------------------------------------

int CmdPosture(const std::string& state_dir) {
  if (auto api = api::WorkerClient::IfServing(state_dir)) return ApiPosture(*api);
  HostFacts facts = ProbeHost(ProbeOptionsFromEnvironment());
  fmt::print("{}\n", PostureLine(facts));
  std::string refusal = ConfinementRefusal(facts);
  if (!refusal.empty()) {
    fmt::print(stderr, "codespace: {}\n", refusal);
    return kExitCodespaceFailed;
  }
  return 0;
}

int CmdPlan(const SpecFlags& flags, bool quiet, const std::string& state_dir) {
  SpecFlags f = flags;
  f.command = {"true"};
  auto spec = SpecFromFlags(f);
  if (!spec.ok()) {
    PrintError(spec.status());
    return kExitCodespaceFailed;
  }
  if (auto api = api::WorkerClient::IfServing(state_dir)) return ApiPlan(*api, *spec, quiet);
  HostFacts facts = ProbeAndReport(quiet);
  std::string id = NewRunId();
  Admission a = Admit(facts, *spec, id);
  fmt::print("admitted: {}\nplan: {}\nnetwork: {}\nnamespace: {}\nreason: {}\n",
             a.admitted ? "yes" : "no", PlanName(a.decision.plan),
             NetworkPostureName(PostureOfPlan(a.decision.plan)),
             a.namespace_name.empty() ? "-" : a.namespace_name + " (for run " + id + ")",
             a.reason.empty() ? "-" : a.reason);
  return a.admitted ? 0 : kExitCodespaceFailed;
}

std::atomic<bool> g_interrupted{false};
// The worker's wake-up (an eventfd), so that a stop interrupts its wait for the next poll even
// when the signal lands on one of its API threads rather than the one waiting. -1: none.
int g_wake_fd = -1;

void OnInterrupt(int) {
  g_interrupted.store(true);
  if (g_wake_fd >= 0) {
    uint64_t one = 1;
    ssize_t ignored = ::write(g_wake_fd, &one, sizeof(one));  // async-signal-safe
    (void)ignored;
  }
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

WorkerConfig MakeWorkerConfig(const std::string& state_dir) {
  WorkerConfig wc;
  wc.state_dir = state_dir;
  wc.codespace_binary = SelfExe();
  wc.init_path = FindSandboxInit();
  wc.drain_grace =
      std::chrono::milliseconds(std::atoll(GetEnv("CODESPACE_DRAIN_GRACE_MS", "5000").c_str()));
  wc.stop_grace =
      std::chrono::milliseconds(std::atoll(GetEnv("CODESPACE_STOP_GRACE_MS", "5000").c_str()));
  // How often the worker looks at the store for runs queued without telling it (the API wakes it).
  wc.poll_interval = std::chrono::milliseconds(
      std::max(1LL, std::atoll(GetEnv("CODESPACE_WORKER_POLL_MS", "100").c_str())));
  return wc;
}

// Probes, opens the store and sweeps: what every command that launches does first.
// Unlike the worker, a one-shot command uses remembered probes when they are fresh for this
// host (probe/probe_cache.h says why that cannot widen a run's network).
struct Session {
  HostFacts facts;
  std::unique_ptr<SqliteRunStore> store;
  std::string probe_cache;
  bool probes_remembered = false;
};
enum class Probes { kRemembered, kFresh };
Result<Session> StartSession(const std::string& state_dir, bool quiet,
                             Probes probes = Probes::kRemembered) {
  Session s;
  RETURN_IF_ERROR(MakeDirs(state_dir, 0700));
  s.probe_cache = state_dir + "/host-probes";
  s.facts = probes == Probes::kFresh ? ProbeHost(ProbeOptionsFromEnvironment())
                                     : ProbeHostRemembering(ProbeOptionsFromEnvironment(),
                                                            s.probe_cache, &s.probes_remembered);
  if (!quiet) fmt::print(stderr, "{}\n", PostureLine(s.facts));
  std::string refusal = ConfinementRefusal(s.facts);
  if (!refusal.empty()) return FailedPreconditionError(refusal);
  ASSIGN_OR_RETURN(s.store, OpenStore(state_dir));
  // What finished runs of this store left behind (a worker killed mid-teardown) goes first.
  SweepResult swept = SweepFinishedRunNamespaces(*s.store, s.facts, state_dir);
  for (const auto& e : swept.errors) fmt::print(stderr, "codespace: sweep: {}\n", e);
  if (!quiet && !swept.removed.empty()) {
    fmt::print(stderr, "codespace: removed {} leftover namespace(s) of finished runs\n",
               swept.removed.size());
  }
  return s;
}

// `start_now`: the foreground `run`, which starts it itself (recorded running at once).
Result<RunRecord> CreateRun(Session& s, const SpecFlags& flags, bool quiet, bool start_now) {
  ASSIGN_OR_RETURN(RunSpec spec, SpecFromFlags(flags));
  LocalProcessRunner runner(s.facts, s.store.get());
  ASSIGN_OR_RETURN(RunRecord created, start_now ? runner.CreateRunning(spec) : runner.Create(spec));
  if (!quiet) {
    fmt::print(stderr, "run {} plan={} network={}{}{}\n", created.id, PlanName(created.plan),
               NetworkPostureName(created.network),
               created.namespace_name.empty() ? "" : " namespace=" + created.namespace_name,
               created.reason.empty() ? "" : fmt::format(" reason=\"{}\"", created.reason));
  }
  return created;
}

int ExitCodeOf(const RunRecord& r) {
  if (r.state == RunState::kAborted || r.state == RunState::kRefused ||
      r.state == RunState::kLost) {
    fmt::print(stderr, "codespace: run {} {}: {}\n", r.id, RunStateName(r.state), r.reason);
    return kExitCodespaceFailed;
  }
  if (r.state == RunState::kCancelled) {
    fmt::print(stderr, "codespace: run {} cancelled: {}\n", r.id, r.reason);
  }
  if (r.signal) return 128 + *r.signal;
  return r.exit_code.value_or(kExitCodespaceFailed);
}

int CmdRun(const SpecFlags& flags, bool quiet, const std::string& state_dir) {
  auto session = StartSession(state_dir, quiet);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitCodespaceFailed;
  }
  auto created = CreateRun(*session, flags, quiet, /*start_now=*/true);
  if (!created.ok()) {
    PrintError(created.status());
    return kExitCodespaceFailed;
  }
  if (created->state == RunState::kRefused) return ExitCodeOf(*created);
  RunStore& store = *session->store;
  WorkerConfig wc = MakeWorkerConfig(state_dir);
  wc.fork_supervisor = GetEnv("CODESPACE_SUPERVISOR_EXEC") != "1";  // one thread here
  // The run is over for its caller once its status.json is written: a filtered run's network is
  // torn down after that, by the supervisor, off the caller's path. The supervisor says so with
  // a byte on this pipe (SupervisorArgs::recorded_fd); an exec'd one (CODESPACE_SUPERVISOR_EXEC)
  // has no pipe, and its exit ends the wait.
  RunDir dir = RunDirFor(state_dir, created->id);
  std::optional<Pipe> recorded;
  if (wc.fork_supervisor) {
    auto pipe = MakePipe();
    if (pipe.ok()) {
      recorded.emplace(std::move(*pipe));
      wc.recorded_fd = recorded->write.get();
    }
  }
  ProcessIdentity sup;
  Status started = StartClaimed(store, wc, session->facts, *created, &sup);
  if (recorded) recorded->write.reset();  // the supervisor's copy alone: EOF once it is gone
  if (!started.ok()) {
    PrintError(started);
    if (session->probes_remembered) ForgetProbes(session->probe_cache);
    auto rec = store.Get(created->id);
    return rec.ok() ? ExitCodeOf(*rec) : kExitCodespaceFailed;
  }
  // Ctrl-C or SIGTERM cancels the run (the supervisor, in its own session, would outlive us).
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGHUP, &sa, nullptr);
  LogFollower follow(dir.stdout_path(), dir.stderr_path(), STDOUT_FILENO, STDERR_FILENO);
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, sup.pid, 0)));
  bool cancel_sent = false;
  for (;;) {
    if (g_interrupted.load() && !cancel_sent) {
      cancel_sent = true;
      RequestCancel(store, state_dir, created->id).IgnoreError();
    }
    size_t copied = follow.Pump();
    int recorded_fd = recorded ? recorded->read.get() : -1;
    pollfd p[2] = {{pidfd.get(), POLLIN, 0}, {recorded_fd, POLLIN, 0}};
    int rc = ::poll(p, 2, copied ? 0 : 10);
    if (!pidfd || (rc > 0 && (p[0].revents & POLLIN))) break;  // the supervisor is gone
    if (rc > 0 && (p[1].revents & (POLLIN | POLLHUP))) {
      if (::access(dir.status_path().c_str(), F_OK) == 0) break;  // recorded; logs sealed
      recorded.reset();  // it could not write status.json: its exit ends the wait
    }
  }
  follow.Pump();  // the sealed tail
  auto check = CheckRun(store, wc, session->facts, *created);
  if (!check.ok()) {
    PrintError(check.status());
    return kExitCodespaceFailed;
  }
  auto rec = store.Get(created->id);
  if (!rec.ok()) {
    PrintError(rec.status());
    return kExitCodespaceFailed;
  }
  // A run planned from remembered probes that did not run its course (bubblewrap or the
  // network setup failed, say): the host may have changed, so the next command probes again.
  if (session->probes_remembered &&
      (rec->state == RunState::kAborted || rec->state == RunState::kLost)) {
    ForgetProbes(session->probe_cache);
  }
  return ExitCodeOf(*rec);
}

int CmdSubmit(const SpecFlags& flags, bool quiet, const std::string& state_dir) {
  if (auto api = api::WorkerClient::IfServing(state_dir)) {
    auto spec = SpecFromFlags(flags);
    if (ApiFailed(spec)) return kExitCodespaceFailed;
    return ApiSubmit(*api, *spec);
  }
  auto session = StartSession(state_dir, quiet);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitCodespaceFailed;
  }
  auto created = CreateRun(*session, flags, /*quiet=*/true, /*start_now=*/false);
  if (!created.ok()) {
    PrintError(created.status());
    return kExitCodespaceFailed;
  }
  fmt::print("{}\n", created->id);
  if (created->state == RunState::kRefused) return ExitCodeOf(*created);
  return 0;
}

int CmdWorker(bool quiet, const std::string& state_dir) {
  // First, while this process is one thread: what forks the supervisors (a thread of the probes
  // or of the API would forbid it). Without one, supervisors are exec'd.
  auto spawner = SupervisorSpawner::Start();
  if (!spawner.ok()) PrintError(spawner.status().WithContext("supervisor spawner (exec instead)"));
  // SPEC: the worker probes once, at its start — never from another command's memory.
  auto session = StartSession(state_dir, quiet, Probes::kFresh);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitCodespaceFailed;
  }
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  fmt::print(stderr, "codespace worker: state dir {}; submit runs with `codespace submit`\n",
             state_dir);
  // The HTTP API (src/api), beside the worker loop, on its own store connection.
  auto api_store = OpenStore(state_dir);
  auto api_config = api::ApiServerConfigFromEnvironment(state_dir);
  if (!api_store.ok() || !api_config.ok()) {
    PrintError(api_store.ok() ? api_config.status() : api_store.status());
    return kExitCodespaceFailed;
  }
  auto wake = WorkerWake::Create();
  if (!wake.ok()) {
    PrintError(wake.status());
    return kExitCodespaceFailed;
  }
  g_wake_fd = wake->fd();
  auto handler = std::make_unique<api::ApiHandler>(session->facts, api_store->get(), state_dir);
  handler->OnQueued([&wake] { wake->Notify(); });
  auto api_server = api::ApiServer::Start(*api_config, std::move(handler));
  if (!api_server.ok()) {
    PrintError(api_server.status().WithContext("worker API"));
    return kExitCodespaceFailed;
  }
  if (!quiet) {
    fmt::print(stderr, "codespace worker: API on unix:{}{}\n", api_config->unix_path,
               api_config->tcp_listen.empty() ? "" : " and tcp:" + api_config->tcp_listen);
  }
  WorkerConfig wc = MakeWorkerConfig(state_dir);
  if (spawner.ok()) wc.spawner = spawner->get();
  Status s = RunWorker(*session->store, wc, session->facts, g_interrupted, &*wake);
  (*api_server)->Stop();
  if (!s.ok()) {
    PrintError(s);
    return kExitCodespaceFailed;
  }
  return 0;
}

int CmdLogs(const std::string& state_dir, const std::string& id, bool follow_flag) {
  if (auto api = api::WorkerClient::IfServing(state_dir)) return ApiLogs(*api, id, follow_flag);
  auto store = OpenStore(state_dir);
  if (!store.ok()) {
    PrintError(store.status());
    return kExitCodespaceFailed;
  }
  auto rec = (*store)->Get(id);
  if (!rec.ok()) {
    PrintError(rec.status());
    return kExitCodespaceFailed;
  }
  RunDir dir = RunDirFor(state_dir, id);
  LogFollower follow(dir.stdout_path(), dir.stderr_path(), STDOUT_FILENO, STDERR_FILENO);
  follow.Pump();
  while (follow_flag && !IsTerminal(rec->state)) {
    if (follow.Pump() == 0) ::usleep(20000);
    auto again = (*store)->Get(id);
    if (again.ok()) rec = std::move(again);
  }
  follow.Pump();
  return 0;
}

int CmdCancel(const std::string& state_dir, const std::string& id) {
  if (auto api = api::WorkerClient::IfServing(state_dir)) return ApiCancel(*api, id);
  auto store = OpenStore(state_dir);
  if (!store.ok()) {
    PrintError(store.status());
    return kExitCodespaceFailed;
  }
  Status s = RequestCancel(**store, state_dir, id);
  if (!s.ok()) {
    PrintError(s);
    return kExitCodespaceFailed;
  }
  fmt::print("cancel requested for run {}\n", id);
  return 0;
}

int CmdRuns(const std::string& state_dir, const std::string& state, size_t limit, bool json) {
  auto store = OpenStore(state_dir);
  if (!store.ok()) {
    PrintError(store.status());
    return kExitCodespaceFailed;
  }
  RunListOptions opts;
  opts.limit = limit;
  if (!state.empty()) {
    auto s = ParseRunState(state);
    if (!s.ok()) {
      PrintError(s.status());
      return kExitCodespaceFailed;
    }
    opts.state = *s;
  }
  auto api = api::WorkerClient::IfServing(state_dir);
  auto runs = api ? api->List(opts) : (*store)->List(opts);
  if (!runs.ok()) {
    PrintError(runs.status());
    return kExitCodespaceFailed;
  }
  if (json) {
    std::string out = "[";
    for (size_t i = 0; i < runs->size(); ++i) {
      out += (i ? "," : "") + RunRecordToJson((*runs)[i], false);
    }
    fmt::print("{}]\n", out);
  } else {
    fmt::print("{}", FormatRecordTable(*runs));
  }
  return 0;
}

int CmdShow(const std::string& state_dir, const std::string& id, bool json) {
  auto store = OpenStore(state_dir);
  if (!store.ok()) {
    PrintError(store.status());
    return kExitCodespaceFailed;
  }
  Result<RunRecord> rec = NotFoundError("no runs");
  auto api = api::WorkerClient::IfServing(state_dir);
  if (id == "latest") {
    RunListOptions opts;
    opts.limit = 1;
    auto runs = api ? api->List(opts) : (*store)->List(opts);
    if (runs.ok() && !runs->empty()) rec = runs->front();
  } else {
    rec = api ? api->Get(id) : (*store)->Get(id);
  }
  if (!rec.ok()) {
    PrintError(rec.status());
    return kExitCodespaceFailed;
  }
  fmt::print("{}", json ? RunRecordToJson(*rec, true) + "\n" : FormatRecord(*rec));
  return 0;
}

int Main(int argc, char** argv) {
  // The supervisor of one run (started by `run` and `worker`, never by hand).
  if (argc >= 2 && std::string(argv[1]) == "__supervise") {
    auto args = ParseSupervisorArgs(std::vector<std::string>(argv + 2, argv + argc));
    if (!args.ok()) {
      PrintError(args.status());
      return kExitCodespaceFailed;
    }
    return SuperviseMain(*args);
  }
  CLI::App app{
      "codespace: run untrusted commands in bubblewrap sandboxes with a network egress "
      "policy per run, and keep a durable record of every run."};
  app.require_subcommand(1);
  bool quiet = false;
  std::string state_dir = DefaultStateDir();
  app.add_flag("--quiet,-q", quiet, "Do not print the posture line");
  app.add_option("--state-dir", state_dir, "Where records are kept (CODESPACE_STATE_DIR)")
      ->default_str(state_dir);

  app.add_subcommand("posture", "Probe the host and print the posture line");

  SpecFlags plan_flags;
  auto* plan = app.add_subcommand(
      "plan", "Public admission: the plan, predicted namespace and reason (runs nothing)");
  AddSpecFlags(plan, &plan_flags, false);

  SpecFlags run_flags;
  auto* run = app.add_subcommand("run", "Run a command in a sandbox, in the foreground");
  AddSpecFlags(run, &run_flags, true);
  run->add_flag("--quiet,-q", quiet, "Do not print the posture and run lines");

  std::string runs_state;
  size_t runs_limit = 50;
  bool runs_json = false;
  auto* runs = app.add_subcommand("runs", "List run records, newest first");
  runs->add_option("--state", runs_state, "Only runs in this state");
  runs->add_option("--limit", runs_limit, "At most this many")->default_str("50");
  runs->add_flag("--json", runs_json, "JSON array of records");

  std::string show_id;
  bool show_json = false;
  auto* show = app.add_subcommand("show", "Show one run's record");
  show->add_option("id", show_id, "Run id, or \"latest\"")->required();
  show->add_flag("--json", show_json, "The record as JSON");

  SpecFlags submit_flags;
  auto* submit = app.add_subcommand("submit", "Queue a run for the worker and print its id");
  AddSpecFlags(submit, &submit_flags, true);

  app.add_subcommand("worker",
                     "The long-lived worker: claims queued runs, supervises them, "
                     "re-binds to runs in flight after a restart");

  std::string logs_id;
  bool logs_follow = false;
  auto* logs = app.add_subcommand("logs", "Stream a run's output, live or sealed");
  logs->add_option("id", logs_id, "Run id")->required();
  logs->add_flag("--follow,-f", logs_follow, "Keep streaming until the run ends");

  std::string cancel_id;
  auto* cancel = app.add_subcommand("cancel", "Stop a run: SIGTERM, a grace, then SIGKILL");
  cancel->add_option("id", cancel_id, "Run id")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitCodespaceFailed;
  }
  if (app.got_subcommand("posture")) return CmdPosture(state_dir);
  if (app.got_subcommand("plan")) return CmdPlan(plan_flags, quiet, state_dir);
  if (app.got_subcommand("run")) return CmdRun(run_flags, quiet, state_dir);
  if (app.got_subcommand("runs")) return CmdRuns(state_dir, runs_state, runs_limit, runs_json);
  if (app.got_subcommand("show")) return CmdShow(state_dir, show_id, show_json);
  if (app.got_subcommand("submit")) return CmdSubmit(submit_flags, quiet, state_dir);
  if (app.got_subcommand("worker")) {
    // The configuration file (src/config/config_file.h): exported into this process's
    // environment (which beats it) before anything reads a setting; a bad file stops the worker.
    auto config = ApplyConfigFileToEnvironment(WorkerConfigKeys());
    if (!config.ok()) {
      PrintError(config.status());
      return kExitCodespaceFailed;
    }
    if (!quiet && !config->empty()) fmt::print(stderr, "codespace worker: {}\n", *config);
    if (app.get_option("--state-dir")->count() == 0) state_dir = DefaultStateDir();
    return CmdWorker(quiet, state_dir);
  }
  if (app.got_subcommand("logs")) return CmdLogs(state_dir, logs_id, logs_follow);
  if (app.got_subcommand("cancel")) return CmdCancel(state_dir, cancel_id);
  return kExitCodespaceFailed;
}

}  // namespace
}  // namespace codespace

int main(int argc, char** argv) { return codespace::Main(argc, argv); }
