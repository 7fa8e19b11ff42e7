#include "worker/worker.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <thread>

#include "base/clock.h"
#include "base/file_util.h"
#include "limits/run_cgroup.h"
#include "net/filtered_netns.h"
#include "sandbox/launcher.h"
#include "supervisor/ended_record.h"
#include "worker/local_runner.h"
#include "worker/namespace_sweep.h"
#include "worker/retention.h"

namespace codespace {

namespace {

SupervisorArgs ArgsFor(const WorkerConfig& c, const HostFacts& facts, const std::string& id) {
  SupervisorArgs a;
  a.state_dir = c.state_dir;
  a.run_id = id;
  a.confined = facts.confines;
  a.bwrap_path = facts.bwrap_path;
  a.init_path = c.init_path;
  a.drain_grace = c.drain_grace;
  a.stop_grace = c.stop_grace;
  return a;
}

void Log(const std::string& line) { std::fprintf(stderr, "codespace worker: %s\n", line.c_str()); }

// Opens a pidfd on `id` and, when it is still that process (checked again now that the pidfd
// pins it, so a reused pid is never signalled), calls `use` with it. False when it is gone.
bool WithLivePidfd(const ProcessIdentity& id, const std::function<void(int pidfd)>& use) {
  if (!IsAlive(id)) return false;
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, id.pid, 0)));
  if (!pidfd || !IsAlive(id)) return false;
  use(pidfd.get());
  return true;
}

// Kills what a dead supervisor left of its sandbox: the process whose death ends it (the pid
// namespace's init when confined; codespace-init, a session leader, when not — its group too),
// and a bubblewrap child stranded before the sandbox ran (see KillStrayBubblewraps).
void KillSandboxLeftovers(const RunDir& dir, const std::string& run_id) {
  KillStrayBubblewraps(run_id);
  // Limits: everything still in the run's cgroup, and the cgroup itself (its supervisor would
  // have removed it after the run).
  if (auto settings = LimitSettingsFromEnvironment(); settings.ok()) {
    RemoveRunCgroupByName(settings->cgroup_root, run_id).IgnoreError();
  }
  auto id = ReadIdentity(dir.sandbox_path());
  if (!id.ok()) return;
  WithLivePidfd(*id, [&](int pidfd) {
    ::kill(-id->pid, SIGKILL);
    ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    pollfd gone{pidfd, POLLIN, 0};
    ::poll(&gone, 1, 5000);
  });
}

// The periodic look (WorkerConfig::recheck_interval): every running run nobody here watches is
// looked at again, on the next round. A run with no supervisor identity yet is left to whoever
// is starting it (a foreground `run` between recording it running and forking its supervisor)
// for kNeverStartedGraceMs; after that the worker starts one, as at its own start.
constexpr int64_t kNeverStartedGraceMs = 30000;
void LookAgainAtUnwatched(RunStore& store, const WorkerConfig& c,
                          const std::map<std::string, UniqueFd>& watched,
                          std::vector<std::string>& recheck) {
  RunListOptions inflight;
  inflight.state = RunState::kRunning;
  inflight.limit = 100000;
  auto running = store.List(inflight);
  if (!running.ok()) return;
  for (const auto& r : *running) {
    if (watched.count(r.id) || std::find(recheck.begin(), recheck.end(), r.id) != recheck.end()) {
      continue;
    }
    bool has_supervisor =
        ::access(RunDirFor(c.state_dir, r.id).supervisor_path().c_str(), F_OK) == 0;
    if (!has_supervisor && NowMs() - r.started_ms < kNeverStartedGraceMs) continue;
    recheck.push_back(r.id);
  }
}

}  // namespace

Result<ProcessIdentity> StartSupervisorFor(const WorkerConfig& c, const HostFacts& facts,
                                           const RunRecord& running) {
  SupervisorArgs a = ArgsFor(c, facts, running.id);
  if (c.fork_supervisor) {
    a.recorded_fd = c.recorded_fd;
    a.stdin_fd = c.stdin_fd;
    a.tty_master_fd = c.tty_master_fd;
    return ForkSupervisor(a, &running);
  }
  if (c.spawner) {
    auto forked = c.spawner->Spawn(a);
    if (forked.ok()) return forked;
    fmt::print(stderr,
               "codespace worker: run {}: the spawner failed ({}); exec'ing its supervisor\n",
               running.id, forked.status().message());
  }
  return StartSupervisor(c.codespace_binary, a);
}

Result<RunRecord> ClaimAndStart(RunStore& store, const WorkerConfig& c, const HostFacts& facts,
                                const RunRecord& queued, ProcessIdentity* supervisor) {
  RunRecord r = queued;
  r.state = RunState::kRunning;
  r.started_ms = NowMs();
  RETURN_IF_ERROR(store.Update(r, RunState::kQueued));
  RETURN_IF_ERROR(StartClaimed(store, c, facts, r, supervisor));
  return r;
}

Status StartClaimed(RunStore& store, const WorkerConfig& c, const HostFacts& facts,
                    const RunRecord& running, ProcessIdentity* supervisor) {
  auto sup = StartSupervisorFor(c, facts, running);
  if (!sup.ok()) {
    RunRecord failed = running;
    failed.state = RunState::kAborted;
    failed.reason = "supervisor did not start: " + sup.status().message();
    failed.ended_ms = NowMs();
    store.Update(failed, RunState::kRunning).IgnoreError();
    return sup.status();
  }
  if (supervisor) *supervisor = *sup;
  return OkStatus();
}

Result<RunCheck> CheckRun(RunStore& store, const WorkerConfig& c, const HostFacts& facts,
                          const RunRecord& running) {
  RunDir dir = RunDirFor(c.state_dir, running.id);
  auto status = ReadRunStatus(dir);
  RunRecord r = running;
  if (status.ok()) {
    r = EndedRecord(running, *status);
    Status s = store.Update(r, RunState::kRunning);
    // Another watcher (the foreground `run`, or a second worker) recorded it first: fine.
    if (!s.ok() && s.code() != StatusCode::kAborted) return s;
    return RunCheck::kRecorded;
  }
  if (status.status().code() != StatusCode::kNotFound) return status.status();
  // The lock, not the pid, says whether a supervisor is alive (it is taken before anything).
  if (SupervisorLockHeld(dir)) return RunCheck::kStillRunning;
  auto sup = ReadIdentity(dir.supervisor_path());
  if (!sup.ok()) return RunCheck::kNeverStarted;
  // The supervisor died without a word: the run is lost. Status may have landed in between,
  // or the supervisor may have recorded the run itself (its disk was full).
  if (ReadRunStatus(dir).ok()) return CheckRun(store, c, facts, running);
  if (auto now = store.Get(running.id); now.ok() && now->state != RunState::kRunning) {
    return RunCheck::kRecorded;
  }
  KillSandboxLeftovers(dir, running.id);
  std::string torn;
  if (!r.namespace_name.empty() && facts.tools()) {
    Status s = FilteredEgressNetns::TearDownNamespaceByName(r.namespace_name);
    torn = s.ok() ? ", its namespace torn down" : ", namespace teardown: " + s.message();
  }
  r.state = RunState::kLost;
  r.ended_ms = NowMs();
  r.reason = fmt::format(
      "its supervisor (pid {}) died without reporting; what was left of the "
      "sandbox was killed{}",
      sup->pid, torn);
  Status s = store.Update(r, RunState::kRunning);
  if (!s.ok() && s.code() != StatusCode::kAborted) return s;
  return RunCheck::kRecorded;
}

RunLogPaths LogPathsOf(const std::string& state_dir, const std::string& run_id) {
  RunDir dir = RunDirFor(state_dir, run_id);
  return {dir.stdout_path(), dir.stderr_path()};
}

Status RequestCancel(RunStore& store, const std::string& state_dir, const std::string& run_id) {
  ASSIGN_OR_RETURN(RunRecord r, store.Get(run_id));
  if (r.state == RunState::kQueued) {
    RunRecord c = r;
    c.state = RunState::kCancelled;
    c.reason = "cancelled on request before it started";
    c.ended_ms = NowMs();
    Status s = store.Update(c, RunState::kQueued);
    if (s.ok()) return OkStatus();
    if (s.code() != StatusCode::kAborted) return s;
    ASSIGN_OR_RETURN(r, store.Get(run_id));  // claimed meanwhile: cancel it running
  }
  if (r.state != RunState::kRunning) {
    return FailedPreconditionError(
        fmt::format("run {} is {}: nothing to cancel", run_id, RunStateName(r.state)));
  }
  RunDir dir = RunDirFor(state_dir, run_id);
  RETURN_IF_ERROR(MakeDirs(dir.path, 0750));
  RETURN_IF_ERROR(WriteFileAtomically(dir.cancel_path(), "cancel\n", 0644));
  if (auto sup = ReadIdentity(dir.supervisor_path()); sup.ok()) {
    WithLivePidfd(*sup,
                  [](int pidfd) { ::syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, nullptr, 0); });
  }
  // A supervisor not yet started finds the cancel file when it does.
  return OkStatus();
}

Result<WorkerWake> WorkerWake::Create() {
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return ErrnoError("eventfd(worker wake)", errno);
  return WorkerWake(UniqueFd(fd));
}

void WorkerWake::Notify() const {
  uint64_t one = 1;
  ssize_t ignored = ::write(fd_.get(), &one, sizeof(one));  // full only after 2^64 wakes
  (void)ignored;
}

void WorkerWake::Drain() const {
  uint64_t n;
  ssize_t ignored = ::read(fd_.get(), &n, sizeof(n));  // nonblocking: EAGAIN when not woken
  (void)ignored;
}

Status RunWorker(RunStore& store, const WorkerConfig& c, const HostFacts& facts,
                 const std::atomic<bool>& stop, const WorkerWake* wake) {
  SweepResult swept = SweepFinishedRunNamespaces(store, facts, c.state_dir);
  for (const auto& e : swept.errors) Log("sweep: " + e);
  // Supervisors being watched: run id → pidfd; runs to look at again next round.
  std::map<std::string, UniqueFd> watched;
  std::vector<std::string> recheck;
  auto watch = [&](const std::string& id, const ProcessIdentity& sup) {
    UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, sup.pid, 0)));
    if (fd && IsAlive(sup)) watched[id] = std::move(fd);
  };
  auto check = [&](const RunRecord& r) {
    auto res = CheckRun(store, c, facts, r);
    if (!res.ok()) {
      Log(fmt::format("run {}: {}", r.id, res.status().message()));
      return;
    }
    if (*res == RunCheck::kNeverStarted) {
      auto sup = StartSupervisorFor(c, facts, r);
      if (sup.ok())
        watch(r.id, *sup);
      else
        Log(fmt::format("run {}: {}", r.id, sup.status().message()));
    } else if (*res == RunCheck::kStillRunning) {
      // Its identity may not be written yet (it takes the lock first): look again shortly.
      auto sup = ReadIdentity(RunDirFor(c.state_dir, r.id).supervisor_path());
      if (sup.ok() && IsAlive(*sup))
        watch(r.id, *sup);
      else
        recheck.push_back(r.id);
    } else {
      Log(fmt::format("run {} recorded", r.id));
    }
  };
  // Re-bind: every run in flight, as the store and run directories say.
  RunListOptions inflight;
  inflight.state = RunState::kRunning;
  inflight.limit = 100000;
  if (auto running = store.List(inflight); running.ok()) {
    for (const auto& r : *running) check(r);
  }
  auto next_look = std::chrono::steady_clock::now() + c.recheck_interval;
  auto next_prune = std::chrono::steady_clock::now();
  while (!stop.load()) {
    if (c.prune_after && std::chrono::steady_clock::now() >= next_prune) {
      next_prune = std::chrono::steady_clock::now() + c.prune_interval;
      PruneResult pruned = PruneRuns(store, c.state_dir, *c.prune_after, NowMs());
      for (const auto& e : pruned.errors) Log("prune: " + e);
      if (!pruned.removed.empty()) {
        Log(fmt::format("pruned {} run(s) that ended over {}s ago", pruned.removed.size(),
                        c.prune_after->count()));
      }
    }
    if (std::chrono::steady_clock::now() >= next_look) {
      next_look = std::chrono::steady_clock::now() + c.recheck_interval;
      LookAgainAtUnwatched(store, c, watched, recheck);
    }
    std::vector<std::string> again;
    again.swap(recheck);
    for (const auto& id : again) {
      if (auto r = store.Get(id); r.ok() && r->state == RunState::kRunning && !watched.count(id)) {
        check(*r);
      }
    }
    RunListOptions q;
    q.state = RunState::kQueued;
    q.limit = 64;
    if (auto queued = store.List(q); queued.ok()) {
      // Oldest first.
      for (auto it = queued->rbegin(); it != queued->rend() && !stop.load(); ++it) {
        ProcessIdentity sup;
        auto started = ClaimAndStart(store, c, facts, *it, &sup);
        if (started.ok()) {
          Log(fmt::format("run {} started (supervisor {})", it->id, sup.pid));
          watch(it->id, sup);
        } else if (started.status().code() != StatusCode::kAborted) {
          Log(fmt::format("run {}: {}", it->id, started.status().message()));
        }
      }
    }
    // Wait for a supervisor to end, a wake (a run was queued), or the next poll.
    std::vector<pollfd> fds;
    std::vector<std::string> ids;
    for (auto& [id, fd] : watched) {
      fds.push_back({fd.get(), POLLIN, 0});
      ids.push_back(id);
    }
    if (wake) fds.push_back({wake->fd(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(c.poll_interval.count()));
    if (rc < 0 && errno != EINTR) return ErrnoError("poll(supervisors)", errno);
    // Drained before the store is read again: a run queued after this read wakes the next poll.
    if (wake && (fds.back().revents & POLLIN)) wake->Drain();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      watched.erase(ids[i]);
      if (auto r = store.Get(ids[i]); r.ok() && r->state == RunState::kRunning) check(*r);
    }
  }
  return OkStatus();
}

}  // namespace codespace
