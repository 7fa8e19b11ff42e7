#include "sandbox/launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "base/file_util.h"
#include "base/process.h"
#include "base/unique_fd.h"
#include "net/netns.h"
#include "relay/sandbox_relay.h"
#include "sandbox/bwrap_args.h"
#include "sandbox/host_layout.h"
#include "sandbox/inside_user.h"
#include "seccomp/seccomp_filter.h"

namespace codespace {

Status FdSink::Write(const char* data, size_t size) { return WriteAll(fd_, data, size); }

OutputSink::Pulled ReadPipeOnce(int pipe_fd, char* buf, size_t size) {
  for (;;) {
    ssize_t n = ::read(pipe_fd, buf, size);
    if (n > 0) return {static_cast<size_t>(n), false};
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return {0, false};
    return {0, true};
  }
}

Result<OutputSink::Pulled> OutputSink::PullFrom(int pipe_fd) {
  char buf[64 * 1024];
  Pulled p = ReadPipeOnce(pipe_fd, buf, sizeof(buf));
  if (p.bytes > 0) RETURN_IF_ERROR(Write(buf, p.bytes));
  return p;
}

namespace {

using Clock = std::chrono::steady_clock;

// The fds a sandboxed command's init inherits, by number inside the sandbox.
constexpr int kStatusFd = 3;
// The run's compiled syscall filter, read (and closed) by bubblewrap's --seccomp, or unconfined
// by codespace-init's --seccomp, before the command starts.
constexpr int kSeccompFd = 4;
constexpr size_t kChunk = 64 * 1024;
// How much one stream may move before the wait loop looks at everything else again.
constexpr size_t kPumpBudget = 4 * 1024 * 1024;
// The output pipes' size: the unprivileged maximum (/proc/sys/fs/pipe-max-size) instead of the
// default 64 KiB.
constexpr int kOutputPipeBytes = 1024 * 1024;

// A sealed-size memory file holding `text`, read from its start (bubblewrap's --ro-bind-data
// reads it to EOF).
Result<UniqueFd> MemoryFile(const char* name, const std::string& text) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
  if (!fd) return ErrnoError(fmt::format("memfd_create({})", name), errno);
  RETURN_IF_ERROR(WriteAll(fd.get(), text.data(), text.size()));
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) return ErrnoError("lseek(memfd, 0)", errno);
  return fd;
}

// How codespace-init said the command ended ("started" comes first; then one of these).
std::optional<RunOutcome> ParseInitLine(const std::string& line, const std::string& command) {
  int n = 0;
  if (std::sscanf(line.c_str(), "exit %d", &n) == 1) return RunOutcome::Exited(n);
  if (std::sscanf(line.c_str(), "signal %d", &n) == 1) return RunOutcome::Signaled(n);
  if (std::sscanf(line.c_str(), "exec-error %d", &n) == 1) {
    RunOutcome o;
    o.kind = n == ENOENT ? RunOutcome::Kind::kNotFound : RunOutcome::Kind::kCannotInvoke;
    o.reason = fmt::format("cannot run {}: {}", command, ErrnoText(n));
    return o;
  }
  return std::nullopt;
}

// One output stream: the read end of the sandbox's pipe, and where its bytes go.
struct Stream {
  UniqueFd fd;
  OutputSink* sink = nullptr;
  const char* name = "";
  Status error;  // the first sink error; later bytes are drained and dropped

  bool open() const { return fd.valid(); }
  // Moves what the pipe holds now into the sink, up to kPumpBudget (then the other streams and
  // the status pipe get their turn); closes the stream at EOF. The sink reads the pipe itself
  // (PullFrom): the log file reads straight into its hashing queue. After a sink error, `buf`
  // takes the bytes and they are dropped.
  void Pump(std::vector<char>& buf) {
    size_t budget = kPumpBudget;
    while (budget > 0) {
      OutputSink::Pulled p;
      if (error.ok()) {
        auto pulled = sink->PullFrom(fd.get());
        if (!pulled.ok()) {
          error = pulled.status().WithContext(fmt::format("{} capture", name));
          continue;
        }
        p = *pulled;
      } else {
        p = ReadPipeOnce(fd.get(), buf.data(), buf.size());
      }
      if (p.end) {
        fd.reset();
        return;
      }
      if (p.bytes == 0) return;
      budget -= std::min(budget, p.bytes);
    }
  }
};

// Whether `pid`'s environment holds `entry` whole: NUL-separated entries, so neither a prefix nor
// a value can match part of one. False for a process gone or a zombie (no environment).
bool EnvironmentHolds(pid_t pid, std::string_view entry) {
  auto environ = ReadFileToString(fmt::format("/proc/{}/environ", pid));
  if (!environ.ok()) return false;
  std::string_view env = *environ;
  for (size_t at = 0; at < env.size();) {
    size_t end = env.find('\0', at);
    if (end == std::string_view::npos) end = env.size();
    if (env.substr(at, end - at) == entry) return true;
    at = end + 1;
  }
  return false;
}

class Launch {
 public:
  Launch(const LaunchRequest& r, FilteredEgressNetns* net) : r_(r), net_(net), buf_(kChunk) {}
  // Left early with bubblewrap unreaped (a failed poll): not by SIGKILL alone, see Run().
  ~Launch() {
    if (child_.running()) child_.KillWithChildren().IgnoreError();
  }
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  RunOutcome Run() {
    const bool confined = r_.decision.confined;
    auto out = MakePipe();
    auto err = MakePipe();
    auto status = MakePipe();
    for (auto* p : {&out, &err, &status}) {
      if (!p->ok()) return RunOutcome::Aborted("sandbox setup failed: " + p->status().message());
    }
    // Every run is filtered (docs/seccomp.md); no filter, no run.
    auto bpf = CompileSeccompBpf({.allow_ptrace = r_.spec.allow_ptrace});
    Result<UniqueFd> seccomp = bpf.ok() ? SeccompBpfFd(*bpf) : Result<UniqueFd>(bpf.status());
    if (!seccomp.ok()) {
      return RunOutcome::Aborted("seccomp filter setup failed: " + seccomp.status().message());
    }
    const bool tty = r_.tty_master_fd >= 0 && r_.stdin_fd >= 0;
    std::vector<std::string> command = {confined ? std::string(kSandboxInitPath) : r_.init_path,
                                        std::to_string(kStatusFd)};
    // Unconfined, no bubblewrap loads it: codespace-init does, before it reports "started".
    if (!confined) {
      command.push_back("--seccomp");
      command.push_back(std::to_string(kSeccompFd));
    }
    if (tty) command.push_back("--tty");
    if (!r_.broker_socket.empty()) {
      std::string names;
      for (const auto& n : r_.broker_env) names += (names.empty() ? "" : ",") + n;
      // Port 0: the relay picks a free one (a shared run listens on the worker's loopback).
      for (const std::string& a : {std::string("--relay"), std::string("0"),
                                   confined ? std::string(kSandboxBrokerSocketPath) : r_.broker_socket,
                                   names.empty() ? std::string("-") : names}) {
        command.push_back(a);
      }
    }
    for (const auto& a : r_.spec.argv) command.push_back(a);

    SpawnOptions o;
    o.fds = {{out->write.get(), 1},
             {err->write.get(), 2},
             {status->write.get(), kStatusFd},
             {seccomp->get(), kSeccompFd}};
    if (r_.stdin_fd >= 0) o.fds.push_back({r_.stdin_fd, 0});  // else /dev/null
    if (tty) {
      o.fds = {{r_.stdin_fd, 0},
               {r_.stdin_fd, 1},
               {r_.stdin_fd, 2},
               {status->write.get(), kStatusFd},
               {seccomp->get(), kSeccompFd}};
    }
    // Limits: the cgroup joined before exec; every process of the run is the OOM killer's first
    // choice, before the worker and its supervisors; open files capped before exec.
    o.cgroup_procs_fds = r_.cgroup_procs_fds;
    o.oom_score_adj = 1000;
    o.nofile_limit = r_.spec.limits.nofile;
    if (net_) o.netns_fd = net_->netns_fd();
    // The synthetic /etc/passwd and /etc/group: bubblewrap reads them from these fds (kept
    // until Spawn has handed them over) — no file a run's uid would need to reach on the host.
    UniqueFd passwd, group;
    if (confined) {
      MountPlan view = BuildMountPlan(r_.spec.fs, ReadHostLayout(r_.spec.fs));
      auto p = MemoryFile("passwd", InsidePasswd(view.home));
      auto g = MemoryFile("group", InsideGroup());
      for (auto* f : {&p, &g}) {
        if (!f->ok()) return RunOutcome::Aborted("sandbox setup failed: " + f->status().message());
      }
      passwd = std::move(*p);
      group = std::move(*g);
      o.fds.emplace_back(passwd.get(), kPasswdFd);
      o.fds.emplace_back(group.get(), kGroupFd);
      BwrapLayout l;
      l.view = std::move(view);
      l.bwrap_path = r_.bwrap_path;
      // Shared keeps the worker's namespace; Filtered the run's (bubblewrap starts inside it).
      l.share_network = r_.decision.plan == Plan::kShared || net_ != nullptr;
      if (net_) l.ro_files.emplace_back(net_->resolv_conf_path(), "/etc/resolv.conf");
      if (!r_.broker_socket.empty()) l.ro_files.emplace_back(r_.broker_socket, kSandboxBrokerSocketPath);
      l.workspace = r_.spec.workspace;
      if (r_.workspace_mount_fd >= 0) l.workspace_source = r_.workspace_source;
      l.hidden_dirs = r_.hidden_dirs;
      l.env = SandboxEnvironment(r_.spec.env, l.view.home);
      l.init_path = r_.init_path;
      l.seccomp_fd = kSeccompFd;
      l.command = command;
      l.tmp_bytes = r_.spec.limits.tmp_bytes;
      l.in_cgroup = !r_.cgroup_procs_fds.empty() && ::access("/sys/fs/cgroup", F_OK) == 0;
      o.argv = BuildBwrapArgv(l);
      // bubblewrap needs no environment (the run's is in --setenv). This one names the run, for
      // KillStrayBubblewraps: the command never sees it (--clearenv), bubblewrap's child holds it
      // until it execs codespace-init.
      o.env = std::vector<std::string>{std::string(kBwrapRunEnv) + "=" + r_.run_id};
      // Nothing here may kill bubblewrap while it sets up (no PR_SET_PDEATHSIG, no --info-fd
      // pipe to die on): its child waits on an eventfd for bubblewrap's word and, were
      // bubblewrap killed before giving it, would wait forever. A supervisor that dies then
      // leaves bubblewrap to finish; codespace-init's "started" then finds no reader and the
      // command never runs. From then on --die-with-parent ties the sandbox to the supervisor.
    } else {
      o.argv = command;
      o.env = SandboxEnvironment(r_.spec.env);
      o.cwd = r_.spec.workspace;
      o.new_session = true;
      // Nothing confines an unconfined run; at least it holds no capability (a root run could
      // otherwise rewrite its own firewall).
      o.drop_capabilities = true;
      if (net_) o.bind_files = {{net_->resolv_conf_path(), "/etc/resolv.conf"}};
      if (r_.decision.plan == Plan::kSevered) {
        // A plain netns needs CAP_SYS_ADMIN; without it, a user namespace of our own may still
        // allow one. If neither can be made, the run is aborted: never run on our network.
        o.unshare_attempts = {CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWNET};
        o.loopback_up = true;
      }
    }
    // The run's own identity (a root worker's; see LaunchRequest) and, for every run, a fresh
    // session keyring: the caller's keys are not the run's.
    o.uid = r_.run_uid;
    o.gid = r_.run_gid;
    o.new_session_keyring = true;
    if (r_.workspace_mount_fd >= 0) {
      o.mount_fd = r_.workspace_mount_fd;
      o.mount_target = confined ? r_.workspace_source : r_.spec.workspace;
    }
    // Held until the sandbox's mounts are made (codespace-init says "started").
    std::optional<NetnsMountLock> mount_lock;
    if (confined) {
      auto lock = NetnsMountLock::Shared();
      if (!lock.ok()) return RunOutcome::Aborted("sandbox setup failed: " + lock.status().message());
      mount_lock.emplace(std::move(*lock));
    }
    auto child = Spawn(o);
    out->write.reset();
    err->write.reset();
    status->write.reset();
    if (!child.ok()) {
      std::string m = child.status().message();
      if (net_) return RunOutcome::Aborted("Filtered-egress netns setup failed: enter namespace: " + m);
      if (r_.decision.plan == Plan::kSevered && !confined) {
        return RunOutcome::Aborted("Severed-egress namespace setup failed: " + m);
      }
      return RunOutcome::Aborted("sandbox setup failed: " + m);
    }
    child_ = std::move(*child);
    out_ = {std::move(out->read), r_.stdout_sink, "stdout", {}};
    if (tty) {
      // The sandbox holds the slave now: ours goes, so that the master reads EOF (EIO) once the
      // last process of the sandbox has closed it. Output comes from the master.
      ::close(r_.stdin_fd);
      out_.fd = UniqueFd(::fcntl(r_.tty_master_fd, F_DUPFD_CLOEXEC, 0));
      out_.name = "terminal";
    }
    err_ = {std::move(err->read), r_.stderr_sink, "stderr", {}};
    status_fd_ = std::move(status->read);
    for (int fd : {out_.fd.get(), err_.fd.get(), status_fd_.get()}) {
      if (fd >= 0) ::fcntl(fd, F_SETFL, O_NONBLOCK);
    }
    // A command that prints fast then blocks on a full pipe a sixteenth as often, and each of
    // our reads takes up to a whole chunk of the log's queue. Best effort: past the user's pipe
    // quota (pipe-user-pages-soft) the kernel says no, and 64 KiB pipes still work.
    for (int fd : {out_.fd.get(), err_.fd.get()}) ::fcntl(fd, F_SETPIPE_SZ, kOutputPipeBytes);
    if (!confined) sandbox_pid_ = child_.pid();

    Loop(mount_lock);
    return Outcome();
  }

 private:
  void Loop(std::optional<NetnsMountLock>& mount_lock) {
    const auto run_deadline =
        r_.spec.timeout.count() > 0 ? std::optional(Clock::now() + r_.spec.timeout) : std::nullopt;
    while (!(child_exited_ && !out_.open() && !err_.open())) {
      auto now = Clock::now();
      std::optional<Clock::time_point> wake;
      auto earliest = [&](std::optional<Clock::time_point> t) {
        if (t && (!wake || *t < *wake)) wake = t;
      };
      if (!stopping_) earliest(run_deadline);
      if (stopping_ && !killed_all_) earliest(stop_deadline_);
      if (main_ && !killed_all_) earliest(drain_deadline_);
      // Everything of the sandbox is dead; a writer still open is outside it (handed the pipe, or
      // a process that escaped the kill) and may never close: give it a grace, then stop reading.
      if (killed_all_ && child_exited_ && !abandon_at_) {
        abandon_at_ = now + r_.drain_grace;
        abandon_hard_ = *abandon_at_ + r_.drain_grace;
      }
      earliest(abandon_at_);
      int timeout_ms = -1;
      if (wake) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*wake - now).count();
        timeout_ms = static_cast<int>(std::max<int64_t>(0, left));
      }
      if (child_exited_ && !killed_all_ && timeout_ms < 0) timeout_ms = 100;
      // Unconfined, after the kill: a writer still open was reparented here late; look again.
      if (killed_all_ && !r_.decision.confined && (out_.open() || err_.open())) {
        KillChildren(-1);
        timeout_ms = 100;
      }
      pollfd fds[5] = {
          {child_exited_ ? -1 : child_.pidfd(), POLLIN, 0},
          {status_fd_.get(), POLLIN, 0},
          {out_.fd.get(), POLLIN, 0},
          {err_.fd.get(), POLLIN, 0},
          {stopping_ ? -1 : r_.cancel_fd, POLLIN, 0},
      };
      int rc = ::poll(fds, 5, timeout_ms);
      if (rc < 0 && errno != EINTR) break;
      if (fds[2].revents) out_.Pump(buf_);
      if (fds[3].revents) err_.Pump(buf_);
      if (fds[1].revents) ReadStatus(mount_lock);
      now = Clock::now();
      if (!stopping_ && fds[4].revents) BeginStop(RunOutcome::Kind::kCancelled);
      if (!stopping_ && run_deadline && now >= *run_deadline) BeginStop(RunOutcome::Kind::kTimedOut);
      if (stopping_ && !killed_all_ && (now >= stop_deadline_ || main_)) KillAll();
      if (main_ && !killed_all_) {
        // The main process is gone: the run ends when every writer has closed, or at the grace.
        if ((!out_.open() && !err_.open()) || now >= drain_deadline_) KillAll();
      }
      if (fds[0].revents && !child_exited_) {
        auto st = child_.Wait();
        child_exited_ = true;
        if (st.ok()) child_status_ = *st;
        if (mount_lock) mount_lock->Release();
        // Confined: the pid namespace is gone with it. Unconfined: init waited for every
        // descendant; any writer still open escaped it and goes at the grace.
        if (r_.decision.confined) {
          KillStrandedBubblewrapChild();
          killed_all_ = true;
        }
        if (!main_) drain_deadline_ = Clock::now() + r_.drain_grace;
      }
      if (child_exited_ && !killed_all_ && !main_ && Clock::now() >= drain_deadline_) KillAll();
      if (abandon_at_ && Clock::now() >= *abandon_at_) AbandonOutput(Clock::now());
    }
    // Status lines written just before the end.
    ReadStatus(mount_lock);
  }

  void AbandonOutput(Clock::time_point now) {
    bool pending = false;
    for (Stream* s : {&out_, &err_}) {
      if (!s->open()) continue;
      // Bytes already in the pipe are the run's (a slow disk may still be taking them); only a
      // pipe that is empty yet held open is cut, or one still written to at twice the grace.
      int queued = 0;
      if (now < abandon_hard_ && ::ioctl(s->fd.get(), FIONREAD, &queued) == 0 && queued > 0) {
        pending = true;
        continue;
      }
      s->fd.reset();
      if (s->error.ok()) {
        s->error = FailedPreconditionError(fmt::format(
            "the run's {} was still held open {} ms after the sandbox was gone (by a process "
            "outside it); its log ends there",
            s->name, r_.drain_grace.count()));
      }
    }
    if (pending) abandon_at_ = now + std::chrono::milliseconds(50);
  }

  void ReadStatus(std::optional<NetnsMountLock>& mount_lock) {
    if (!status_fd_) return;
    char b[256];
    for (;;) {
      ssize_t n = ::read(status_fd_.get(), b, sizeof(b));
      if (n > 0) {
        status_text_.append(b, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) status_fd_.reset();
      break;
    }
    size_t nl;
    while ((nl = status_text_.find('\n')) != std::string::npos) {
      std::string line = status_text_.substr(0, nl);
      status_text_.erase(0, nl + 1);
      if (line == "started") {
        started_ = true;
        if (mount_lock) mount_lock->Release();
        if (r_.decision.confined) LocateNamespaceInit();
        if (r_.on_started && sandbox_pid_ > 0) r_.on_started(sandbox_pid_);
        continue;
      }
      if (auto parsed = ParseInitLine(line, r_.spec.argv[0]); parsed && !main_) {
        main_ = parsed;
        main_ended_ = Clock::now();
        main_ended_before_kill_ = !killed_all_;
        drain_deadline_ = Clock::now() + r_.drain_grace;
      }
    }
  }

  // The sandbox's pid-namespace init: bubblewrap's one child. It cannot be reaped (its pid
  // reused) between the two looks, bubblewrap being our child and alive; the second look
  // confirms the pidfd opened between them is that process.
  void LocateNamespaceInit() {
    if (child_exited_) return;
    auto kids = ChildrenOf(child_.pid());
    if (kids.size() != 1) return;
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, kids[0], 0)));
    if (!pidfd || ChildrenOf(child_.pid()) != kids) return;
    // The pidfd pins the process: the timeout and cancel signal it, never a reused pid.
    ns_init_pidfd_ = std::move(pidfd);
    sandbox_pid_ = kids[0];
  }

  // bubblewrap killed from outside before it let its child go on (between arming
  // --die-with-parent and its word): that child waits for the word forever, reparented here (a
  // subreaper) by then. Only our children are looked at: a few reads, not a walk of /proc.
  void KillStrandedBubblewrapChild() {
    if (r_.run_id.empty()) return;  // bubblewrap was given no name to be found by
    const std::string entry = std::string(kBwrapRunEnv) + "=" + r_.run_id;
    for (pid_t c : ChildrenOf(::getpid())) {
      if (!EnvironmentHolds(c, entry)) continue;
      ::kill(c, SIGKILL);
      while (::waitpid(c, nullptr, __WALL) < 0 && errno == EINTR) {
      }
    }
  }

  void BeginStop(RunOutcome::Kind why) {
    stopping_ = true;
    stop_kind_ = why;
    stop_started_ = Clock::now();
    stop_deadline_ = stop_started_ + r_.stop_grace;
    // SIGTERM to codespace-init, which passes it to the command.
    if (r_.decision.confined) {
      if (sandbox_pid_ > 0) {
        for (pid_t c : ChildrenOf(sandbox_pid_)) ::kill(c, SIGTERM);
      }
    } else {
      child_.Signal(SIGTERM).IgnoreError();
    }
  }

  void KillAll() {
    killed_all_ = true;
    if (r_.decision.confined) {
      if (ns_init_pidfd_) {
        // SIGKILL to the pid namespace's init: the kernel kills every process in it, and the
        // init's pidfd turns readable only after the last of them is gone.
        ::syscall(SYS_pidfd_send_signal, ns_init_pidfd_.get(), SIGKILL, nullptr, 0);
        pollfd gone{ns_init_pidfd_.get(), POLLIN, 0};
        while (::poll(&gone, 1, 10000) < 0 && errno == EINTR) {
        }
      }
      if (ns_init_pidfd_) {
        child_.Signal(SIGKILL).IgnoreError();  // --die-with-parent takes anything left with it
      } else {
        // Still setting up: its child may be waiting on bubblewrap's word (see Run()).
        child_.KillWithChildren().IgnoreError();
      }
    } else {
      // codespace-init first, reaped, so that its descendants are reparented here (this process
      // is a subreaper); then all of them, generation by generation.
      if (!child_exited_) {
        child_.Signal(SIGKILL).IgnoreError();
        auto st = child_.Wait();
        if (st.ok()) child_status_ = *st;
        child_exited_ = true;
      }
      KillChildren(-1);
    }
  }

  RunOutcome Outcome() {
    RunOutcome o;
    if (stopping_) {
      o = StopOutcome();
    } else if (main_) {
      o = *main_;
    } else if (started_) {
      o = RunOutcome::Signaled(child_status_.signaled ? child_status_.signal : SIGKILL);
      o.reason = fmt::format("the sandbox's init died before reporting ({})",
                             child_status_.ToString());
    } else {
      o = RunOutcome::Aborted(fmt::format(
          "sandbox setup failed: {} {} before the command started (its message is on the "
          "run's stderr)",
          r_.decision.confined ? "bubblewrap" : "codespace-init", child_status_.ToString()));
    }
    for (const Stream* s : {&out_, &err_}) {
      if (!s->error.ok() && o.output_error.empty()) o.output_error = s->error.message();
    }
    return o;
  }

  // A stopped run (cancel or timeout): the record tells what the command did with the SIGTERM.
  // A command that ended by itself within the grace (it trapped SIGTERM and exited 3, or died
  // of the SIGTERM) keeps its own status and the reason says when; only one still running at
  // the grace's end was SIGKILLed, and only then does the reason say so.
  RunOutcome StopOutcome() const {
    RunOutcome o;
    o.kind = stop_kind_;
    std::string why =
        stop_kind_ == RunOutcome::Kind::kTimedOut
            ? fmt::format("wall-clock timeout of {}s reached", r_.spec.timeout.count())
            : std::string("cancelled on request");
    const bool by_itself =
        main_ && main_ended_before_kill_ &&
        (main_->kind == RunOutcome::Kind::kExited || main_->kind == RunOutcome::Kind::kSignaled);
    if (by_itself && main_ended_ < stop_started_) {
      // It had ended before the stop; what was stopped was its background processes.
      o.exit_code = main_->kind == RunOutcome::Kind::kExited ? main_->exit_code : 0;
      o.signal = main_->kind == RunOutcome::Kind::kSignaled ? main_->signal : 0;
      o.reason = fmt::format(
          "{}; the command had already ended, its background processes were "
          "stopped (SIGTERM, then SIGKILL after {} ms)",
          why, r_.stop_grace.count());
      return o;
    }
    if (by_itself) {
      auto after =
          std::chrono::duration_cast<std::chrono::milliseconds>(main_ended_ - stop_started_)
              .count();
      o.exit_code = main_->kind == RunOutcome::Kind::kExited ? main_->exit_code : 0;
      o.signal = main_->kind == RunOutcome::Kind::kSignaled ? main_->signal : 0;
      o.reason =
          fmt::format("{}; SIGTERM was sent and the command {} {} ms later (grace {} ms)", why,
                      o.signal ? fmt::format("died of signal {}", o.signal)
                               : fmt::format("exited with status {}", o.exit_code),
                      after, r_.stop_grace.count());
      return o;
    }
    o.signal = main_ && main_->kind == RunOutcome::Kind::kSignaled ? main_->signal : SIGKILL;
    o.reason = fmt::format(
        "{}; the sandbox was stopped (SIGTERM, then SIGKILL after {} ms: the command was still "
        "running)",
        why, r_.stop_grace.count());
    return o;
  }

  const LaunchRequest& r_;
  FilteredEgressNetns* net_;
  std::vector<char> buf_;
  ChildProcess child_;
  Stream out_, err_;
  UniqueFd status_fd_, ns_init_pidfd_;
  std::string status_text_;
  pid_t sandbox_pid_ = -1;
  bool started_ = false;
  std::optional<RunOutcome> main_;
  bool child_exited_ = false;
  ExitStatus child_status_;
  bool stopping_ = false;
  RunOutcome::Kind stop_kind_ = RunOutcome::Kind::kCancelled;
  Clock::time_point stop_deadline_, drain_deadline_;
  Clock::time_point stop_started_, main_ended_;
  bool main_ended_before_kill_ = false;
  bool killed_all_ = false;
  std::optional<Clock::time_point> abandon_at_;
  Clock::time_point abandon_hard_;
};

}  // namespace

namespace {

// One look through /proc: SIGKILLs every process whose environment holds `entry` whole; how many.
int KillProcessesWithEnvironmentEntry(const std::string& entry) {
  int killed = 0;
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    pid_t pid = std::atoi(e->d_name);
    if (EnvironmentHolds(pid, entry) && ::kill(pid, SIGKILL) == 0) ++killed;
  }
  ::closedir(proc);
  return killed;
}

}  // namespace

void KillStrayBubblewraps(std::string_view run_id) {
  if (run_id.empty()) return;
  const std::string entry = std::string(kBwrapRunEnv) + "=" + std::string(run_id);
  // Killing a bubblewrap may strand a child it made a moment before (the very case this is
  // for), one that a look already under way can miss: look again until a look finds nothing.
  // A killed process is seen until it is gone (a zombie shows no environment); a few ms.
  for (int look = 0; look < 200; ++look) {
    if (KillProcessesWithEnvironmentEntry(entry) == 0) return;
    ::usleep(2000);
  }
}

void KillChildren(pid_t spare) {
  for (int round = 0; round < 1000; ++round) {
    std::vector<pid_t> kids = ChildrenOf(::getpid());
    std::erase(kids, spare);
    if (kids.empty()) return;
    for (pid_t k : kids) ::kill(k, SIGKILL);
    // Reap exactly those (never a child someone else waits for): their children are ours next.
    for (pid_t k : kids) {
      while (::waitpid(k, nullptr, __WALL) < 0 && errno == EINTR) {
      }
    }
  }
}

RunOutcome LaunchAndWait(const LaunchRequest& r) {
  if (r.spec.argv.empty()) return RunOutcome::Aborted("the run has no command");
  if (r.decision.plan == Plan::kRefused) return RunOutcome::Aborted("refused: " + r.decision.reason);
  if (!r.stdout_sink || !r.stderr_sink) return RunOutcome::Aborted("launch: no output sinks");
  if (r.init_path.empty()) return RunOutcome::Aborted("sandbox setup failed: codespace-init not found");
  if (r.decision.confined && r.bwrap_path.empty()) {
    return RunOutcome::Aborted("sandbox setup failed: bubblewrap not found");
  }
  // Fail closed on limits: never launched with fewer than it asked for.
  if (r.spec.limits.needs_cgroup() && r.cgroup_procs_fds.empty()) {
    return RunOutcome::Aborted(
        fmt::format("limits setup failed: the run asks for {} but has no cgroup",
                    DescribeLimits(r.spec.limits)));
  }
  if (r.spec.limits.tmp_bytes && !r.decision.confined) {
    return RunOutcome::Aborted(
        "limits setup failed: --tmp-size needs a private /tmp, which an unconfined run does not "
        "have");
  }
  // Descendants that outlive their parents are reparented here, so that an unconfined run's
  // whole tree can be found and killed (a confined one dies with its pid namespace).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  if (r.decision.plan != Plan::kFiltered) return Launch(r, nullptr).Run();

  // Filtered: the run's namespace, firewall and DNS gate first; any failure aborts the run
  // before its command starts (fail closed: never launched with the worker's network).
  if (r.namespace_name.empty()) {
    return RunOutcome::Aborted(
        "Filtered-egress netns setup failed: create namespace: no namespace name was admitted "
        "for this run");
  }
  FilteredNetnsConfig c;
  c.run_id = r.run_id;
  c.namespace_name = r.namespace_name;
  c.allowlist = r.spec.egress.allowlist;
  c.pool = r.pool;
  c.upstream_dns = r.upstream_dns;
  c.before_step = r.before_setup_step;
  OutputSink* err = r.stderr_sink;
  c.on_refused = [id = r.run_id, err](std::string_view name) {
    std::string line = fmt::format("codespace: run {}: DNS gate refused \"{}\"\n", id, name);
    std::fputs(line.c_str(), stderr);
    (void)err;
  };
  auto net = FilteredEgressNetns::Setup(std::move(c));
  if (!net.ok()) return RunOutcome::Aborted(net.status().message());
  RunOutcome o = Launch(r, net->get()).Run();
  (*net)->Quiesce();
  o.network_report = (*net)->Report();
  if (r.keep_network) {
    *r.keep_network = std::move(*net);
    return o;
  }
  Status down = (*net)->Teardown();
  if (!down.ok()) std::fprintf(stderr, "codespace: run %s: %s\n", r.run_id.c_str(), down.message().c_str());
  return o;
}

std::string FindSandboxInit() {
  std::string env = GetEnv("CODESPACE_INIT_PATH");
  if (!env.empty()) return env;
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  std::string dir(self);
  dir = dir.substr(0, dir.find_last_of('/'));
  for (const std::string& candidate :
       {dir + "/codespace-init", dir + "/../libexec/codespace/codespace-init"}) {
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace codespace
