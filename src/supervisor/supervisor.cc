#include "supervisor/supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "base/clock.h"
#include "base/file_util.h"
#include "base/process.h"
#include "identity/run_identity.h"
#include "limits/run_cgroup.h"
#include "net/network_settings.h"
#include "relay/broker_bridge.h"
#include "relay/relay.h"
#include "sandbox/launcher.h"
#include "seccomp/syscall_policy.h"
#include "store/sqlite_run_store.h"
#include "supervisor/ended_record.h"
#include "supervisor/log_file.h"

namespace codespace {

std::vector<std::string> SupervisorArgv(const std::string& bin, const SupervisorArgs& a) {
  return {bin,
          "__supervise",
          "--state-dir",
          a.state_dir,
          "--run",
          a.run_id,
          "--confined",
          a.confined ? "1" : "0",
          "--bwrap",
          a.bwrap_path.empty() ? "-" : a.bwrap_path,
          "--init",
          a.init_path,
          "--drain-grace-ms",
          std::to_string(a.drain_grace.count()),
          "--stop-grace-ms",
          std::to_string(a.stop_grace.count())};
}

Result<SupervisorArgs> ParseSupervisorArgs(const std::vector<std::string>& args) {
  SupervisorArgs a;
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string& k = args[i];
    const std::string& v = args[i + 1];
    if (k == "--state-dir")
      a.state_dir = v;
    else if (k == "--run")
      a.run_id = v;
    else if (k == "--confined")
      a.confined = v == "1";
    else if (k == "--bwrap")
      a.bwrap_path = v == "-" ? "" : v;
    else if (k == "--init")
      a.init_path = v;
    else if (k == "--drain-grace-ms")
      a.drain_grace = std::chrono::milliseconds(std::atoll(v.c_str()));
    else if (k == "--stop-grace-ms")
      a.stop_grace = std::chrono::milliseconds(std::atoll(v.c_str()));
    else
      return InvalidArgumentError(fmt::format("__supervise: unknown argument {}", k));
  }
  if (a.state_dir.empty() || !IsValidRunId(a.run_id)) {
    return InvalidArgumentError("__supervise: --state-dir and a valid --run are required");
  }
  return a;
}

Result<ProcessIdentity> StartSupervisor(const std::string& bin, const SupervisorArgs& a) {
  ASSIGN_OR_RETURN(Pipe ready, MakePipe());
  SpawnOptions o;
  o.argv = SupervisorArgv(bin, a);
  o.new_session = true;
  o.fds = {{ready.write.get(), 3}};
  ASSIGN_OR_RETURN(ChildProcess intermediate, Spawn(o));
  ready.write.reset();
  // The intermediate forks the supervisor, reports its pid, and exits.
  ASSIGN_OR_RETURN(std::string text, ReadAll(ready.read.get()));
  ASSIGN_OR_RETURN(ExitStatus st, intermediate.Wait());
  pid_t pid = static_cast<pid_t>(std::atoi(text.c_str()));
  if (!st.success() || pid <= 0) {
    return InternalError(
        fmt::format("supervisor for run {} did not start ({})", a.run_id, st.ToString()));
  }
  return IdentityOf(pid);
}

namespace {

int g_cancel_fd = -1;

void OnCancelSignal(int) {
  uint64_t one = 1;
  ssize_t ignored = ::write(g_cancel_fd, &one, sizeof(one));
  (void)ignored;
}

uint64_t PeakRssKb() {
  auto text = ReadFileToString("/proc/self/status");
  if (!text.ok()) return 0;
  size_t at = text->find("VmHWM:");
  return at == std::string::npos ? 0 : std::strtoull(text->c_str() + at + 6, nullptr, 10);
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "codespace supervisor: %s\n", what.c_str());
  return 1;
}

Result<RunRecord> ReadRunningRecord(const SupervisorArgs& a) {
  ASSIGN_OR_RETURN(auto store, SqliteRunStore::Open(a.state_dir + "/codespace.db"));
  return store->Get(a.run_id);  // the store closes here: the watcher writes the record
}

int Supervise(const SupervisorArgs& a, const RunRecord* given);

// running → ended, from `status`, in the store; another watcher first (kAborted) is fine.
void RecordOwnRun(const SupervisorArgs& a, const RunRecord& running, const RunStatus& status) {
  auto store = SqliteRunStore::Open(a.state_dir + "/codespace.db");
  if (!store.ok()) {
    Fail(fmt::format("run {}: record: {}", a.run_id, store.status().message()));
    return;
  }
  Status s = (*store)->Update(EndedRecord(running, status), RunState::kRunning);
  if (!s.ok() && s.code() != StatusCode::kAborted) {
    Fail(fmt::format("run {}: record: {}", a.run_id, s.message()));
  }
}

}  // namespace

int SuperviseMain(const SupervisorArgs& a) {
  // Detach: the caller's child forks the supervisor, tells the caller its pid on fd 3, exits.
  pid_t pid = ::fork();
  if (pid < 0) return Fail(fmt::format("fork: {}", ErrnoText(errno)));
  if (pid > 0) {
    std::string text = std::to_string(pid);
    WriteAll(3, text).IgnoreError();
    return 0;
  }
  ::close(3);
  return Supervise(a, nullptr);
}

Result<ProcessIdentity> ForkSupervisor(const SupervisorArgs& a, const RunRecord* record) {
  RETURN_IF_ERROR(RequireOneThread("ForkSupervisor"));
  // One fork, not a daemon's two: the second (~1 ms here: the whole address space is copied
  // again) only keeps a session leader from acquiring a controlling terminal, and the supervisor
  // opens no terminal — its streams are /dev/null, its log and pipes. While the caller lives the
  // supervisor is its child (the caller reaps nothing: it waits on a pidfd and exits); after, it
  // is reparented like any orphan.
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork(supervisor)", errno);
  if (pid == 0) {
    // Its own session: the caller's terminal signals (Ctrl-C) reach the caller, which cancels.
    ::setsid();
    // Nothing of the caller's is kept but the standard streams (which Supervise redirects) and
    // the pipe it reads "recorded" from: not its store's descriptors, not its locks' — and none
    // of its state is ever used again.
    SupervisorArgs mine = a;
    // The caller's stdin (`run -i`) at fd 4, out of the way of fd 0 (which Supervise points at
    // /dev/null) and of the recorded pipe (3). Staged above both first: either may sit at 3 or 4.
    int stdin_staged = a.stdin_fd >= 0 ? ::fcntl(a.stdin_fd, F_DUPFD_CLOEXEC, 10) : -1;
    int tty_staged = a.tty_master_fd >= 0 ? ::fcntl(a.tty_master_fd, F_DUPFD_CLOEXEC, 10) : -1;
    if (a.recorded_fd >= 0) {
      mine.recorded_fd = 3;
      if (a.recorded_fd != 3 && ::dup3(a.recorded_fd, 3, O_CLOEXEC) < 0) mine.recorded_fd = -1;
    }
    mine.stdin_fd = -1;
    if (stdin_staged >= 0 && ::dup3(stdin_staged, 4, O_CLOEXEC) == 4) mine.stdin_fd = 4;
    mine.tty_master_fd = -1;
    if (tty_staged >= 0 && ::dup3(tty_staged, 5, O_CLOEXEC) == 5) mine.tty_master_fd = 5;
    if (mine.recorded_fd < 0) ::close(3);
    if (mine.stdin_fd < 0) ::close(4);
    if (mine.tty_master_fd < 0) ::close(5);
    ::close_range(6, ~0U, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // _exit: the caller's atexit handlers and static destructors (its store) are not ours.
    ::_exit(Supervise(mine, record));
  }
  return IdentityOf(pid);
}

namespace {

// The supervisor proper, in its own detached process. `given`: the record as its creator wrote
// it (ForkSupervisor), or null to read it from the store (`codespace __supervise`).
int Supervise(const SupervisorArgs& a, const RunRecord* given) {
  // One name for either way it started (a forked one keeps its caller's command line).
  ::prctl(PR_SET_NAME, kSupervisorProcessName, 0, 0, 0);
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    ::dup2(devnull, 0);
    ::close(devnull);
  }
  // The supervisor's own complaints go to a file beside the logs (its stderr is the caller's).
  RunDir dir = RunDirFor(a.state_dir, a.run_id);
  if (Status s = MakeDirs(dir.path, 0750); !s.ok()) return Fail(s.message());
  int own_log = ::open((dir.path + "/supervisor.log").c_str(),
                       O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (own_log >= 0) {
    ::dup2(own_log, 1);
    ::dup2(own_log, 2);
    ::close(own_log);
  }
  // One supervisor per run, ever at once: a second (two workers racing) leaves here, having
  // done nothing.
  auto lock = TakeSupervisorLock(dir);
  if (!lock.ok()) {
    if (lock.status().code() == StatusCode::kAlreadyExists) return 0;
    return Fail(lock.status().message());
  }
  if (::access(dir.status_path().c_str(), F_OK) == 0) return 0;  // it ran and ended already
  auto me = IdentityOf(::getpid());
  if (!me.ok()) return Fail(me.status().message());
  if (Status s = WriteIdentity(dir.supervisor_path(), *me); !s.ok()) return Fail(s.message());

  Result<RunRecord> record = given ? Result<RunRecord>(*given) : ReadRunningRecord(a);
  if (!record.ok()) return Fail(record.status().message());
  if (record->state != RunState::kRunning) {
    return Fail(fmt::format("run {} is {}, not running", a.run_id, RunStateName(record->state)));
  }

  UniqueFd cancel(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  g_cancel_fd = cancel.get();
  struct sigaction sa {};
  sa.sa_handler = OnCancelSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  // A cancel asked before this process could hear it.
  if (::access(dir.cancel_path().c_str(), F_OK) == 0) OnCancelSignal(SIGTERM);

  auto out = FileLogSink::Create(dir.stdout_path());
  auto err = FileLogSink::Create(dir.stderr_path());
  if (!out.ok() || !err.ok()) return Fail((!out.ok() ? out : err).status().message());

  auto cfg = NetworkSettingsFromEnvironment();
  LaunchRequest req;
  req.run_id = record->id;
  req.spec = record->spec;
  // The plan recorded at admission: a supervisor never decides again.
  req.decision = PlanDecision{record->plan, a.confined, record->reason};
  req.bwrap_path = a.bwrap_path;
  req.init_path = a.init_path;
  req.hidden_dirs = {a.state_dir};
  req.namespace_name = record->namespace_name;
  if (cfg.ok()) {
    req.pool = cfg->pool;
    req.upstream_dns = cfg->upstream_dns;
  }
  req.stdout_sink = out->get();
  req.stderr_sink = err->get();
  req.cancel_fd = cancel.get();
  req.stdin_fd = a.stdin_fd;
  req.tty_master_fd = a.tty_master_fd;
  req.drain_grace = a.drain_grace;
  req.stop_grace = a.stop_grace;
  // Setup: from just before the launch to the sandbox's first "started" report — bubblewrap,
  // the namespaces, a filtered run's network and DNS gate. Monotonic: a clock step is no setup.
  std::chrono::steady_clock::time_point launched;
  std::optional<int64_t> setup_ms;
  req.on_started = [&](pid_t sandbox) {
    if (!setup_ms) {
      setup_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - launched)
                     .count();
    }
    if (auto id = IdentityOf(sandbox); id.ok())
      WriteIdentity(dir.sandbox_path(), *id).IgnoreError();
  };
  RunStatus status;
  // A root worker's run is nobody on the host (identity/): a leased uid and gid of its own and
  // its workspace idmapped for it. A failure aborts the run: it never runs as root. Declared
  // before the bridge: its lease dir (the relay socket's) outlives the bridge.
  std::unique_ptr<RunIdentity> identity;
  if (PerRunIdentityHere()) {
    auto prepared = PrepareRunIdentity(record->spec.workspace);
    if (prepared.ok()) {
      identity = std::move(*prepared);
      req.run_uid = identity->uid();
      req.run_gid = identity->gid();
      req.workspace_mount_fd = identity->workspace_mount_fd();
      req.workspace_source = identity->workspace_mount_point();
      status.host_uid = identity->uid();
      status.host_gid = identity->gid();
    } else {
      status.outcome =
          RunOutcome::Aborted("run identity setup failed: " + prepared.status().message());
    }
  }
  // The broker's worker side: a socket in the run directory that the sandbox gets bound in,
  // relaying to the broker alone, and counting what passes (where the run cannot touch it).
  std::unique_ptr<BrokerBridge> bridge;
  // A leased run's socket is in its lease dir instead, the run's uid's alone (mode 0600): the
  // run dir is in the 0700 state dir, which bubblewrap, running as that uid, cannot traverse.
  const std::string broker_socket =
      identity ? identity->relay_dir() + "/broker.sock" : dir.path + "/broker.sock";
  if (!record->spec.broker.empty() && status.outcome.reason.empty()) {
    auto addr = ParseBrokerAddress(record->spec.broker.address);
    if (addr.ok()) {
      auto started = BrokerBridge::Start(broker_socket, *addr);
      if (started.ok())
        bridge = std::move(*started);
      else
        addr = started.status();
    }
    if (addr.ok() && identity &&
        (::chown(broker_socket.c_str(), identity->uid(), identity->gid()) != 0 ||
         ::chmod(broker_socket.c_str(), 0600) != 0)) {
      addr = ErrnoError(fmt::format("chown/chmod({}, {}, 0600)", broker_socket, identity->uid()),
                        errno);
    }
    if (!addr.ok()) {
      status.outcome = RunOutcome::Aborted("broker relay setup failed: " + addr.status().message());
    } else {
      req.broker_socket = broker_socket;
      req.broker_env = record->spec.broker.env_names;
    }
  }
  // A filtered run's network outlives LaunchAndWait until the run is recorded (below): whoever
  // waits for the run learns how it ended without waiting for the kernel to delete a veth and a
  // table. Torn down at the end of this function on every path (the destructor, at worst); if
  // this process dies first, the run is already recorded and the sweep removes it by name.
  std::unique_ptr<FilteredEgressNetns> network;
  req.keep_network = &network;
  // Limits (issue 15): the run's cgroup, made before anything of the run exists; the sandbox's
  // first process joins it before exec. Removed below, after the usage is read.
  std::unique_ptr<RunCgroup> cgroup;
  if (status.outcome.reason.empty()) {
    auto settings = LimitSettingsFromEnvironment();
    auto made = settings.ok()
                    ? MakeRunCgroup(settings->cgroup_root, record->id, record->spec.limits)
                    : Result<std::unique_ptr<RunCgroup>>(settings.status());
    if (!made.ok()) {
      status.outcome = RunOutcome::Aborted("limits setup failed: " + made.status().message());
    } else if ((cgroup = std::move(*made))) {
      req.cgroup_procs_fds = cgroup->procs_fds();
    }
  }
  // The record names the syscall filter the run was admitted under; the launch builds its own
  // from the spec and must build that one (another binary since admission: not launched).
  const std::string filter = SeccompFilterName({.allow_ptrace = record->spec.allow_ptrace});
  if (status.outcome.reason.empty() && !record->seccomp.empty() && record->seccomp != filter) {
    status.outcome = RunOutcome::Aborted(fmt::format(
        "seccomp filter setup failed: the run was admitted under filter {} but this supervisor "
        "builds {}",
        record->seccomp, filter));
  }
  if (status.outcome.reason.empty()) {
    launched = std::chrono::steady_clock::now();
    status.outcome = LaunchAndWait(req);
    status.setup_ms = setup_ms;
  }
  if (cgroup) {
    // The sandbox is gone (its pid namespace killed whole); read what it used, then kill
    // anything that escaped that (an unconfined run's daemon) and remove the cgroup.
    status.usage = cgroup->ReadUsage();
    status.outcome = ClassifyLimitKill(status.outcome, record->spec.limits, &status.usage);
    if (Status s = cgroup->KillAndRemove(); !s.ok()) {
      Fail(fmt::format("run {}: cgroup: {}", a.run_id, s.message()));
    }
  }
  if (bridge) {
    bridge->Stop();
    RelayStats rs = bridge->stats();
    status.outcome.network_report.broker_connections = rs.connections_accepted;
    status.outcome.network_report.broker_failed = rs.connections_failed;
    status.outcome.network_report.broker_bytes_to = rs.bytes_to_target;
    status.outcome.network_report.broker_bytes_from = rs.bytes_from_target;
  }

  // Every writer has closed (or was killed): now the logs can be sealed.
  auto so = (*out)->Seal();
  auto se = (*err)->Seal();
  if (so.ok()) status.stdout_log = *so;
  if (se.ok()) status.stderr_log = *se;
  if (!so.ok() || !se.ok()) {
    std::string why = (!so.ok() ? so : se).status().message();
    if (status.outcome.output_error.empty()) status.outcome.output_error = "seal: " + why;
  }
  status.supervisor_peak_rss_kb = PeakRssKb();
  status.ended_ms = NowMs();
  Status written = WriteRunStatus(dir, status);
  auto tear_down = [&network, &a] {
    if (!network) return;
    Status down = network->Teardown();
    if (!down.ok()) Fail(fmt::format("run {}: teardown: {}", a.run_id, down.message()));
  };
  if (written.ok()) {
    if (a.recorded_fd >= 0) {
      Status told = WriteAll(a.recorded_fd, "r");
      ::close(a.recorded_fd);
      // EPIPE: the foreground `codespace run` that started this run is gone (killed, say), and
      // with it the one watcher that would have recorded it: this process records it, from the
      // status it just wrote, rather than leave it `running` until a worker next looks. Should
      // the caller die after reading the byte instead, a worker's periodic look records it.
      if (!told.ok()) RecordOwnRun(a, *record, status);
    }
    tear_down();
    return 0;
  }
  // The run directory's disk is full (or gone): the outcome goes into the record itself, so
  // the run is not judged lost for want of a file.
  auto again = SqliteRunStore::Open(a.state_dir + "/codespace.db");
  if (!again.ok()) return Fail(written.message() + "; and " + again.status().message());
  // The record the watcher would have made from status.json (EndedRecord: it already carries
  // any output error), and why there is no status.json.
  RunRecord r = EndedRecord(*record, status);
  const std::string why = "status: " + written.message();
  r.reason = r.reason.empty() ? why : r.reason + "; " + why;
  Status s = (*again)->Update(r, RunState::kRunning);
  tear_down();
  return s.ok() ? 0 : Fail(s.message());
}

}  // namespace

}  // namespace codespace
