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
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "api/api_server.h"
#include "api/worker_client.h"
#include "base/clock.h"
#include "base/file_util.h"
#include "cli/cli_rules.h"
#include "cli/everyday.h"
#include "cli/log_follow.h"
#include "cli/pty_session.h"
#include "cli/record_format.h"
#include "cli/state_dir.h"
#include "config/config.h"
#include "config/config_file.h"
#include "plan/admission.h"
#include "policy/public_suffix.h"
#include "posture/host_facts.h"
#include "probe/host_probe.h"
#include "probe/probe_cache.h"
#include "run/run_outcome.h"
#include "run/spec_check.h"
#include "sandbox/launcher.h"
#include "seccomp/seccomp_filter.h"
#include "store/record_json.h"
#include "store/sqlite_run_store.h"
#include "supervisor/run_dir.h"
#include "supervisor/supervisor.h"
#include "worker/local_runner.h"
#include "worker/namespace_sweep.h"
#include "worker/retention.h"
#include "worker/worker.h"

namespace codespace {
namespace {

struct SpecFlags {
  std::string egress;  // empty: not given (EffectiveEgress decides)
  std::vector<std::string> allow;
  std::string workspace;
  std::vector<std::string> env;
  std::vector<std::string> env_files;
  int64_t timeout = 0;
  std::string broker;
  std::vector<std::string> broker_env;
  std::string fs = "default";
  std::vector<std::string> ro_binds, binds, hides;
  std::string state_dir;  // the worker's, which no bind may show
  bool allow_ptrace = false;
  std::vector<std::string> command;
  std::string name;             // --name (run, submit)
  std::string idempotency_key;  // --idempotency-key (submit); made up when not given
  // Limits (issue 15), as typed: parsed in SpecFromFlags.
  std::string memory, pids, cpus, tmp_size, nofile;
};

void AddSpecFlags(CLI::App* app, SpecFlags* f, bool with_command) {
  app->add_option("--egress", f->egress,
                  "Egress policy: none | allowlist | open (default: none; allowlist when an "
                  "--allow is given)");
  app->add_option("--allow", f->allow,
                  "Allowlist entry (repeatable): host, *.suffix, IPv4/IPv6 address or CIDR, "
                  "optional :port ([v6]:port)")
      ->allow_extra_args(false);  // one value per --allow, so "--" still starts the command
  // Limits (issue 15; docs/limits.md). Unset: the worker's default (CODESPACE_DEFAULT_*).
  app->add_option("--memory", f->memory, "Memory limit, swap included: 512M, 2G");
  app->add_option("--pids", f->pids, "At most this many processes (and threads) at once");
  app->add_option("--cpus", f->cpus, "CPU bandwidth in cores: 0.5, 1.5");
  app->add_option("--tmp-size", f->tmp_size, "Size of the run's /tmp and of its /var/tmp: 512M");
  app->add_option("--nofile", f->nofile, "Open files per process (RLIMIT_NOFILE)");
  if (!with_command) return;
  app->add_option("--workspace", f->workspace,
                  "Directory bound read-write and used as the working directory (default: "
                  "the current directory)");
  app->add_option("--env,-e", f->env, "KEY=VALUE for the run's environment (repeatable)")
      ->allow_extra_args(false);
  app->add_option("--env-file", f->env_files,
                  "A file of KEY=VALUE lines for the run's environment ('#' comments; "
                  "repeatable; --env wins)")
      ->allow_extra_args(false);
  app->add_option("--timeout", f->timeout, "Wall-clock timeout in seconds (0: none)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            int64_t n = -1;
            auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
            if (ec != std::errc() || end != v.data() + v.size() || n < 0 || n > 31'536'000) {
              return "takes whole seconds from 0 (no timeout) to 31536000 (a year), not \"" + v +
                     "\"";
            }
            return "";
          },
          "SECONDS"));
  app->add_option("--broker", f->broker,
                  "A broker the run reaches whatever its egress: unix:/path or 127.0.0.1:PORT "
                  "(inside: http://127.0.0.1:<port> in CODESPACE_BROKER_URL)");
  app->add_option("--broker-env", f->broker_env,
                  "Also announce the broker URL in this variable (repeatable), e.g. "
                  "ANTHROPIC_BASE_URL")
      ->allow_extra_args(false);
  // The file-system view (run/fs_view.h, docs/view.md).
  app->add_option("--fs", f->fs,
                  "File-system view: default (system dirs, /etc with secrets masked, private "
                  "/tmp and HOME, the workspace, your binds) | host (the whole host read-only)")
      ->default_str("default");
  app->add_option("--ro-bind", f->ro_binds,
                  "SRC[:DST]: show host path SRC read-only at DST (default: SRC) (repeatable)")
      ->allow_extra_args(false);
  app->add_option("--bind", f->binds, "SRC[:DST]: the same, read-write (repeatable)")
      ->allow_extra_args(false);
  app->add_option("--hide", f->hides,
                  "PATH: mask PATH inside (an empty read-only directory, or /dev/null) "
                  "(repeatable)")
      ->allow_extra_args(false);
  app->add_flag("--allow-ptrace", f->allow_ptrace,
                "Let the run ptrace its own processes (debuggers, strace): the syscall filter's "
                "one opt-in, recorded in the spec");
  app->add_option("command", f->command, "The command and its arguments, after --")->required();
}

Result<RunSpec> SpecFromFlags(const SpecFlags& f) {
  RunSpec spec;
  using Parse = Result<uint64_t> (*)(std::string_view);
  for (auto [flag, text, field, parse] :
       {std::tuple<const char*, const std::string*, uint64_t RunLimits::*, Parse>{
            "--memory", &f.memory, &RunLimits::memory_bytes, ParseByteSize},
        {"--pids", &f.pids, &RunLimits::pids, ParseCount},
        {"--cpus", &f.cpus, &RunLimits::cpu_millis, ParseCpus},
        {"--tmp-size", &f.tmp_size, &RunLimits::tmp_bytes, ParseByteSize},
        {"--nofile", &f.nofile, &RunLimits::nofile, ParseCount}}) {
    if (text->empty()) continue;
    auto parsed = parse(*text);
    if (!parsed.ok()) return parsed.status().WithContext(flag);
    spec.limits.*field = *parsed;
  }
  ASSIGN_OR_RETURN(SandboxEgressPolicy mode, ParseEgressPolicy(EffectiveEgress(f.egress, f.allow)));
  ASSIGN_OR_RETURN(spec.egress, MakeEgressPolicy(mode, f.allow));
  spec.env = f.env;
  if (!f.env_files.empty()) {  // the files first: a later --env of the same key wins
    std::vector<std::string> env;
    for (const auto& file : f.env_files) {
      auto text = ReadFileToString(file);
      if (!text.ok()) return text.status().WithContext("--env-file " + file);
      ASSIGN_OR_RETURN(auto lines, ParseEnvFile(*text, file));
      env.insert(env.end(), lines.begin(), lines.end());
    }
    env.insert(env.end(), f.env.begin(), f.env.end());
    spec.env = std::move(env);
  }
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
  spec.allow_ptrace = f.allow_ptrace;
  if (!f.broker.empty()) {
    spec.broker.address = f.broker;
    spec.broker.env_names = f.broker_env;
  } else if (!f.broker_env.empty()) {
    return InvalidArgumentError("--broker-env needs --broker");
  }
  ASSIGN_OR_RETURN(spec.fs.kind, ParseFsViewKind(f.fs));
  for (const auto& b : f.ro_binds) spec.fs.binds.push_back(ParseBindFlag(b, true));
  for (const auto& b : f.binds) spec.fs.binds.push_back(ParseBindFlag(b, false));
  // A later bind lies over an earlier one. Flags of two kinds lose their relative order, so a
  // bind inside another goes after it (`--bind /p --ro-bind /p/keys` leaves /p/keys read-only).
  std::stable_sort(spec.fs.binds.begin(), spec.fs.binds.end(),
                   [](const FsBind& a, const FsBind& b) {
                     return std::count(a.destination.begin(), a.destination.end(), '/') <
                            std::count(b.destination.begin(), b.destination.end(), '/');
                   });
  spec.fs.hides = f.hides;
  // The one check of a spec, the API's too (run/spec_check.h): same rules, same words.
  RETURN_IF_ERROR(CheckSpecStatus(spec, f.state_dir));
  return spec;
}

void PrintError(const Status& s) { fmt::print(stderr, "codespace: {}\n", s.message()); }

// --- Everyday helpers (issue 20): JSON output, hints, parse-error messages.

std::string JsonEscape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += {'\\', static_cast<char>(c)};
    else if (c < 0x20)
      out += fmt::format("\\u{:04x}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

std::string AdmissionJson(const Admission& a, const std::string& id) {
  return fmt::format(
      "{{\"admitted\":{},\"plan\":\"{}\",\"network\":\"{}\",\"namespace\":\"{}\","
      "\"reason\":\"{}\",\"run_id\":\"{}\"}}",
      a.admitted ? "true" : "false", PlanName(a.decision.plan),
      NetworkPostureName(PostureOfPlan(a.decision.plan)), JsonEscape(a.namespace_name),
      JsonEscape(a.reason), id);
}

// A brokered run whose command never reads CODESPACE_BROKER_URL hangs on its own: say where the
// URL is (and how to put it where an agent looks) when no --broker-env was given.
void PrintBrokerHint(const SpecFlags& f) {
  if (f.broker.empty() || !f.broker_env.empty()) return;
  fmt::print(stderr,
             "codespace: the broker is at the URL in CODESPACE_BROKER_URL inside the run; a "
             "command that reads another variable needs --broker-env NAME (e.g. "
             "--broker-env ANTHROPIC_BASE_URL for claude)\n");
}

// A parse error names the bad flag or subcommand and points to --help (CLI::App::exit prints it).
std::string ParseFailureMessage(const CLI::App& app, const CLI::Error& e) {
  const CLI::App* sub = nullptr;
  for (const CLI::App* s : app.get_subcommands()) sub = s;
  std::string command = sub ? "codespace " + sub->get_name() : std::string("codespace");
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    std::vector<std::string> rest = app.remaining(true);
    return "codespace: " + UnexpectedArgumentsMessage(command, sub == nullptr, rest) + "\n";
  }
  if (!sub && !app.remaining().empty()) {  // `codespace frob`: no such subcommand
    return "codespace: " + UnexpectedArgumentsMessage(command, true, app.remaining()) + "\n";
  }
  if (!sub && dynamic_cast<const CLI::RequiredError*>(&e)) {
    return "codespace: a command is required (posture, plan, run, submit, worker, runs, show, "
           "logs, wait, cancel, rm, prune); see `codespace --help`\n";
  }
  return fmt::format("codespace: {}: {}; see `{} --help`\n", command, e.what(), command);
}

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

int CmdPosture(const std::string& state_dir, bool json = false) {
  if (auto api = api::WorkerClient::IfServing(state_dir)) {
    if (!json) return ApiPosture(*api);
    auto p = api->GetPosture();
    if (ApiFailed(p)) return kExitCodespaceFailed;
    // The worker's API gives the line and the refusal (GET /v1/posture has the facts too).
    fmt::print("{{\"line\":\"{}\",\"refusal\":\"{}\"}}\n", JsonEscape(p->line),
               JsonEscape(p->refusal));
    return p->refusal.empty() ? 0 : kExitCodespaceFailed;
  }
  HostFacts facts = ProbeHost(ProbeOptionsFromEnvironment());
  if (json) {
    fmt::print("{}\n", PostureJson(facts));
    return ConfinementRefusal(facts).empty() ? 0 : kExitCodespaceFailed;
  }
  fmt::print("{}\n", PostureLine(facts));
  std::string refusal = ConfinementRefusal(facts);
  if (!refusal.empty()) {
    fmt::print(stderr, "codespace: {}\n", refusal);
    return kExitCodespaceFailed;
  }
  return 0;
}

// The filter's name and table, and (for benchmarks and inspection) its compiled program.
int CmdSeccomp(bool allow_ptrace, const std::string& bpf_path) {
  SeccompOptions o{.allow_ptrace = allow_ptrace};
  fmt::print("seccomp {}\n{}", SeccompFilterName(o), FormatPolicyTable(SyscallPolicyRows(o)));
  if (bpf_path.empty()) return 0;
  auto bpf = CompileSeccompBpf(o);
  Status written = bpf.ok() ? WriteFileAtomically(bpf_path, *bpf, 0644) : bpf.status();
  if (!written.ok()) {
    PrintError(written);
    return kExitCodespaceFailed;
  }
  return 0;
}

int CmdPlan(const SpecFlags& flags, bool quiet, const std::string& state_dir, bool json = false) {
  SpecFlags f = flags;
  f.command = {"true"};
  auto spec = SpecFromFlags(f);
  if (!spec.ok()) {
    PrintError(spec.status());
    return kExitCodespaceFailed;
  }
  for (const AllowlistEntry& e : spec->egress.allowlist) {  // as a run's creation would refuse
    if (Status s = CheckWildcardNotPublicSuffix(e, SystemPublicSuffixList()); !s.ok()) {
      PrintError(s);
      return kExitCodespaceFailed;
    }
  }
  if (auto api = api::WorkerClient::IfServing(state_dir); api && !json) {
    return ApiPlan(*api, *spec, quiet);
  }
  HostFacts facts = ProbeAndReport(quiet || json);
  std::string id = NewRunId();
  Admission a = Admit(facts, *spec, id);
  if (json) {
    fmt::print("{}\n", AdmissionJson(a, id));
    return a.admitted ? 0 : kExitCodespaceFailed;
  }
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
  CreateOptions labels{flags.name, start_now ? std::string() : flags.idempotency_key};
  ASSIGN_OR_RETURN(RunRecord created,
                   start_now ? runner.CreateRunning(spec, labels) : runner.Create(spec, labels));
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
  } else if (r.state == RunState::kCancelled) {
    fmt::print(stderr, "codespace: run {} cancelled: {}\n", r.id, r.reason);
  }
  return RecordShellCode(r);
}

// How the foreground `run` connects the caller to its command (cli/interactive docs).
struct InteractiveFlags {
  bool stdin_through = false;  // -i: the caller's stdin is the command's
  bool terminal = false;       // -t: the command gets a pty of its own (cli/pty_session.h)
};

int CmdRun(const SpecFlags& flags, bool quiet, const std::string& state_dir,
           const InteractiveFlags& interactive = {}) {
  if (!quiet) PrintBrokerHint(flags);
  if ((interactive.stdin_through || interactive.terminal) &&
      GetEnv("CODESPACE_SUPERVISOR_EXEC") == "1") {
    PrintError(FailedPreconditionError(
        "-i and -t need the forked supervisor (CODESPACE_SUPERVISOR_EXEC=1 execs it, without "
        "stdin)"));
    return kExitCodespaceFailed;
  }
  // -t: the run's own terminal, before anything is recorded (no terminal on stdin: refused).
  std::unique_ptr<TerminalSession> tty;
  std::atomic<bool> window_changed{false};
  if (interactive.terminal) {
    auto opened = TerminalSession::Open();
    if (!opened.ok()) {
      PrintError(opened.status());
      return kExitCodespaceFailed;
    }
    tty = std::move(*opened);
    TerminalSession::WatchWindowSize(&window_changed);
  }
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
  // -i: our stdin goes to the forked supervisor and on to the command as its fd 0; we never
  // read it ourselves. Without -i the command's stdin is /dev/null.
  if (interactive.stdin_through) wc.stdin_fd = STDIN_FILENO;
  if (tty) {  // -t: the pty's slave is the command's stdin (and stdout, stderr); -i is implied
    wc.stdin_fd = tty->slave();
    wc.tty_master_fd = tty->master();
  }
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
  if (tty) tty->CloseSlave();             // the supervisor's copy alone, as above
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
    pollfd p[3] = {{pidfd.get(), POLLIN, 0},
                   {recorded_fd, POLLIN, 0},
                   {tty ? tty->input_fd() : -1, POLLIN, 0}};
    int rc = ::poll(p, 3, copied ? 0 : 10);
    if (tty) {  // what the user typed, to the command's terminal; and its size when it changes
      if (rc > 0 && p[2].revents) tty->PumpInput();
      if (window_changed.exchange(false)) tty->SyncWindowSize();
    }
    if (!pidfd || (rc > 0 && (p[0].revents & POLLIN))) break;  // the supervisor is gone
    if (rc > 0 && (p[1].revents & (POLLIN | POLLHUP))) {
      if (::access(dir.status_path().c_str(), F_OK) == 0) break;  // recorded; logs sealed
      recorded.reset();  // it could not write status.json: its exit ends the wait
    }
  }
  follow.Pump();  // the sealed tail
  if (tty) tty->Restore();  // before any message below (the destructor restores on early returns)
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

// An answer that says nothing about whether the run was created (the worker died mid-call, a
// connection refused while it restarts): with the idempotency key, asking again is safe.
bool SubmitMayRetry(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kPermissionDenied:
      return false;
    default:
      return true;
  }
}

int CmdSubmit(const SpecFlags& given, bool quiet, const std::string& state_dir, bool json = false) {
  if (!quiet) PrintBrokerHint(given);
  SpecFlags flags = given;
  // Every submit carries a key; made here when not given, so that the retries below (and a
  // fallback to the store when the worker is gone) can never create a second run.
  if (flags.idempotency_key.empty()) flags.idempotency_key = "cs-" + NewRunId();
  constexpr int kAttempts = 6;
  for (int attempt = 1;; ++attempt) {
    auto api = api::WorkerClient::IfServing(state_dir);
    if (!api) break;  // no worker (any more): the store, with the same key
    auto spec = SpecFromFlags(flags);
    if (ApiFailed(spec)) return kExitCodespaceFailed;
    auto created = api->Submit(*spec, flags.idempotency_key, flags.name);
    if (!created.ok() && SubmitMayRetry(created.status()) && attempt < kAttempts) {
      fmt::print(stderr, "codespace: submit: {}; asking again with idempotency key {}\n",
                 created.status().message(), flags.idempotency_key);
      ::usleep(static_cast<useconds_t>(100000) << (attempt - 1));
      continue;
    }
    if (!created.ok()) {
      PrintError(created.status());
      if (SubmitMayRetry(created.status())) {
        fmt::print(stderr,
                   "codespace: the run may have been queued; `codespace submit "
                   "--idempotency-key {} ...` again returns it (never a second run), or look "
                   "in `codespace runs`\n",
                   flags.idempotency_key);
      }
      return kExitCodespaceFailed;
    }
    fmt::print("{}\n", json ? RunRecordToJson(*created, false) : created->id);
    return created->state == RunState::kRefused ? ExitCodeOf(*created) : 0;
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
  fmt::print("{}\n", json ? RunRecordToJson(*created, false) : created->id);
  // The id first, where stdout and stderr share a pipe: a caller reading the first line gets it.
  std::fflush(stdout);
  if (created->state == RunState::kRefused) return ExitCodeOf(*created);
  // Nothing answered on the API socket (that is how we got here): no worker will start it now.
  // Exit 0 still (it is queued), but not in silence.
  std::string notice = NoWorkerNotice(state_dir);
  if (!notice.empty()) fmt::print(stderr, "codespace: run {} queued; {}\n", created->id, notice);
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
  // Retention by age (CODESPACE_PRUNE_AFTER=30d); unset: records are kept until removed.
  auto prune_after = PruneAfterFromEnvironment();
  if (!prune_after.ok()) {
    PrintError(prune_after.status());
    (*api_server)->Stop();
    return kExitCodespaceFailed;
  }
  wc.prune_after = *prune_after;
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
  if (follow_flag && rec->state == RunState::kQueued) {
    std::string notice = NoWorkerNotice(state_dir);
    if (!notice.empty()) fmt::print(stderr, "codespace: run {} is queued; {}\n", id, notice);
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
  LookAtRunsInFlight(**store, state_dir);
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
  LookAtRunsInFlight(**store, state_dir);
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

// --- Everyday commands and helpers (issue 20) --------------------------------------------

int CmdWait(const std::string& state_dir, const std::string& id, bool json) {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  auto rec = WaitForEnd(state_dir, id, g_interrupted);
  if (ApiFailed(rec)) return kExitCodespaceFailed;
  if (json) fmt::print("{}\n", RunRecordToJson(*rec, false));
  return ExitCodeOf(*rec);
}

int CmdRm(const std::string& state_dir, const std::vector<std::string>& ids) {
  auto store = OpenStore(state_dir);
  if (ApiFailed(store)) return kExitCodespaceFailed;
  int rc = 0;
  for (const auto& given : ids) {
    auto id = ResolveRunId(state_dir, given);
    Status s = id.ok() ? RemoveRun(**store, state_dir, *id) : id.status();
    if (!s.ok()) {
      PrintError(s);
      rc = kExitCodespaceFailed;
      continue;
    }
    fmt::print("removed {}\n", *id);
  }
  return rc;
}

int CmdPrune(const std::string& state_dir, const std::string& age_text, bool json) {
  auto age = ParseDuration(age_text);
  if (ApiFailed(age)) return kExitCodespaceFailed;
  auto store = OpenStore(state_dir);
  if (ApiFailed(store)) return kExitCodespaceFailed;
  PruneResult pruned = PruneRuns(**store, state_dir, *age, NowMs());
  for (const auto& e : pruned.errors) fmt::print(stderr, "codespace: prune: {}\n", e);
  if (json) {
    std::string out = "[";
    for (size_t i = 0; i < pruned.removed.size(); ++i) {
      out += fmt::format("{}\"{}\"", i ? "," : "", pruned.removed[i]);
    }
    fmt::print("{}]\n", out);
  } else {
    fmt::print("removed {} run(s) that ended over {} ago\n", pruned.removed.size(), age_text);
  }
  return pruned.errors.empty() ? 0 : kExitCodespaceFailed;
}

// --- end of the everyday commands ----------------------------------------------------------

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
  bool json = false;
  std::string state_dir = DefaultStateDir();
  app.add_flag("--quiet,-q", quiet, "Do not print the posture line");
  app.add_flag("--json", json, "Print records, lists, the plan and the posture as JSON");
  app.add_option("--state-dir", state_dir, "Where records are kept (CODESPACE_STATE_DIR)")
      ->default_str(state_dir);
  app.set_version_flag("--version", std::string("codespace ") + CODESPACE_VERSION);
  // Global flags after the subcommand too (`codespace submit --quiet ...`): a flag a subcommand
  // does not know falls through to here. Set before the subcommands, which inherit it.
  app.fallthrough();
  app.failure_message(
      [&app](const CLI::App*, const CLI::Error& e) { return ParseFailureMessage(app, e); });

  app.add_subcommand("posture", "Probe the host and print the posture line");

  SpecFlags plan_flags;
  auto* plan = app.add_subcommand(
      "plan", "Public admission: the plan, predicted namespace and reason (runs nothing)");
  AddSpecFlags(plan, &plan_flags, false);

  SpecFlags run_flags;
  auto* run = app.add_subcommand("run", "Run a command in a sandbox, in the foreground");
  AddSpecFlags(run, &run_flags, true);
  run->add_flag("--quiet,-q", quiet, "Do not print the posture and run lines");
  run->add_option("--name", run_flags.name,
                  "A name for the run, accepted wherever a run id is (newest of that name)");
  InteractiveFlags run_interactive;
  run->add_flag("--interactive,-i", run_interactive.stdin_through,
                "Pass stdin through to the command (default: its stdin is /dev/null)");
  run->add_flag("--tty,-t", run_interactive.terminal,
                "Give the command a terminal of its own (implies -i; stdin must be a terminal): "
                "codespace run -it -- claude");

  std::string runs_state;
  size_t runs_limit = 50;
  auto* runs = app.add_subcommand("runs", "List run records, newest first");
  runs->add_option("--state", runs_state, "Only runs in this state");
  runs->add_option("--limit", runs_limit, "At most this many")->default_str("50");

  std::string show_id;
  auto* show = app.add_subcommand("show", "Show one run's record");
  show->add_option("id", show_id, "Run id, name, or \"latest\"")->required();

  SpecFlags submit_flags;
  auto* submit = app.add_subcommand("submit", "Queue a run for the worker and print its id");
  AddSpecFlags(submit, &submit_flags, true);
  submit->add_option("--name", submit_flags.name,
                     "A name for the run, accepted wherever a run id is (newest of that name)");
  submit->add_option("--idempotency-key", submit_flags.idempotency_key,
                     "Submit at most once per key: a retry with it returns the first run "
                     "(default: a key made for this call, reused by its own retries)");

  app.add_subcommand("worker",
                     "The long-lived worker: claims queued runs, supervises them, "
                     "re-binds to runs in flight after a restart");

  std::string logs_id;
  bool logs_follow = false;
  auto* logs = app.add_subcommand("logs", "Stream a run's output, live or sealed");
  logs->add_option("id", logs_id, "Run id, name, or \"latest\"")->required();
  logs->add_flag("--follow,-f", logs_follow, "Keep streaming until the run ends");

  std::string cancel_id;
  auto* cancel = app.add_subcommand("cancel", "Stop a run: SIGTERM, a grace, then SIGKILL");
  cancel->add_option("id", cancel_id, "Run id, name, or \"latest\"")->required();

  // --- Everyday commands (issue 20): wait, rm, prune.
  std::string wait_id;
  auto* wait =
      app.add_subcommand("wait", "Wait for a run to end; exit with its status (as `run` does)");
  wait->add_option("id", wait_id, "Run id, name, or \"latest\"")->required();
  std::vector<std::string> rm_ids;
  auto* rm = app.add_subcommand("rm", "Remove ended runs: their records and logs together");
  rm->add_option("ids", rm_ids,
                 "Run ids or names (or \"latest\"); a run in flight is never removed")
      ->required();
  std::string prune_age;
  auto* prune = app.add_subcommand(
      "prune", "Remove every run that ended longer ago than --older-than (records and logs)");
  prune->add_option("--older-than", prune_age, "Age: a whole number and s, m, h, d or w (30d)")
      ->required();

  // Every setting, its value and where it came from (config/config.h, docs/configuration.md).
  app.add_subcommand("config", "Print every setting: value, source, variable (--json: an array)");

  bool seccomp_ptrace = false;
  std::string seccomp_bpf;
  auto* seccomp = app.add_subcommand(
      "seccomp", "Print the syscall filter every run gets: its name and table (runs nothing)");
  seccomp->add_flag("--allow-ptrace", seccomp_ptrace, "The filter of a run with --allow-ptrace");
  seccomp->add_option("--bpf", seccomp_bpf, "Also write the compiled BPF program to this file");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitCodespaceFailed;
  }
  for (SpecFlags* f : {&plan_flags, &run_flags, &submit_flags}) f->state_dir = state_dir;
  if (app.got_subcommand("posture")) return CmdPosture(state_dir, json);
  if (app.got_subcommand("plan")) return CmdPlan(plan_flags, quiet, state_dir, json);
  if (app.got_subcommand("run")) return CmdRun(run_flags, quiet, state_dir, run_interactive);
  if (app.got_subcommand("runs")) return CmdRuns(state_dir, runs_state, runs_limit, json);
  if (app.got_subcommand("submit")) return CmdSubmit(submit_flags, quiet, state_dir, json);
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
  // "latest" wherever an id is taken.
  for (std::string* id : {&logs_id, &cancel_id, &wait_id, &show_id}) {
    if (id->empty() || IsValidRunId(*id)) continue;  // empty: not this subcommand's
    auto resolved = ResolveRunId(state_dir, *id);
    if (ApiFailed(resolved)) return kExitCodespaceFailed;
    *id = *resolved;
  }
  if (app.got_subcommand("show")) return CmdShow(state_dir, show_id, json);
  if (app.got_subcommand("logs")) return CmdLogs(state_dir, logs_id, logs_follow);
  if (app.got_subcommand("cancel")) return CmdCancel(state_dir, cancel_id);
  if (app.got_subcommand("wait")) return CmdWait(state_dir, wait_id, json);
  if (app.got_subcommand("rm")) return CmdRm(state_dir, rm_ids);
  if (app.got_subcommand("prune")) return CmdPrune(state_dir, prune_age, json);
  if (app.got_subcommand("config")) {
    Config c = Config::Load();
    fmt::print("{}", json ? c.ToJson() : c.ToText());
    return 0;
  }
  if (app.got_subcommand("seccomp")) return CmdSeccomp(seccomp_ptrace, seccomp_bpf);
  return kExitCodespaceFailed;
}

}  // namespace
}  // namespace codespace

int main(int argc, char** argv) { return codespace::Main(argc, argv); }
