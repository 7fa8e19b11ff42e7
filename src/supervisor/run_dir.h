// A run's directory, <state dir>/runs/<id>/: what its supervisor leaves for whoever records it.
//
//   stdout, stderr   the command's output, sealed (fsynced, read-only) at the end
//   supervisor.lock  write-locked (a POSIX record lock, fcntl F_SETLK; flock() does not see it)
//                    by the run's one supervisor for its whole life: a second one (two workers
//                    racing to start it) cannot take it and leaves; a free lock means no
//                    supervisor is alive
//   supervisor       "<pid> <start time>": the supervisor's identity (a pid alone can be reused)
//   sandbox          "<pid> <start time>": the process whose death ends the sandbox
//   cancel           present: a cancel was requested
//   status.json      how the run ended (RunStatus), written last and atomically: its presence
//                    means the run is over and its logs are sealed
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "run/log_digest.h"
#include "run/network_report.h"
#include "run/run_limits.h"
#include "run/run_outcome.h"

namespace codespace {

struct RunDir {
  std::string path;
  std::string stdout_path() const { return path + "/stdout"; }
  std::string stderr_path() const { return path + "/stderr"; }
  std::string supervisor_path() const { return path + "/supervisor"; }
  std::string sandbox_path() const { return path + "/sandbox"; }
  std::string cancel_path() const { return path + "/cancel"; }
  std::string status_path() const { return path + "/status.json"; }
  std::string lock_path() const { return path + "/supervisor.lock"; }
};

// Takes the run's supervisor lock without waiting: kAlreadyExists when another process holds
// it. The lock lasts as long as the returned descriptor, and is this process's alone: its
// children never hold it.
Result<UniqueFd> TakeSupervisorLock(const RunDir& dir);
// Whether some process holds the run's supervisor lock now.
bool SupervisorLockHeld(const RunDir& dir);

RunDir RunDirFor(const std::string& state_dir, const std::string& run_id);

// A process, named so that a reused pid is not mistaken for it.
struct ProcessIdentity {
  pid_t pid = -1;
  uint64_t start_time = 0;  // /proc/<pid>/stat field 22, in clock ticks since boot
  friend bool operator==(const ProcessIdentity&, const ProcessIdentity&) = default;
};
Result<ProcessIdentity> IdentityOf(pid_t pid);
// True when `id` names a process that is alive now (same pid, same start time).
bool IsAlive(const ProcessIdentity& id);
Status WriteIdentity(const std::string& path, const ProcessIdentity& id);
Result<ProcessIdentity> ReadIdentity(const std::string& path);

// How a run ended, as its supervisor saw it.
struct RunStatus {
  RunOutcome outcome;
  LogDigest stdout_log, stderr_log;
  uint64_t supervisor_peak_rss_kb = 0;  // VmHWM of the supervisor: its memory stayed bounded
  // Sandbox and network setup: from the supervisor's launch to the sandbox reporting "started".
  // Unset (and "setup_ms" absent from status.json) when the command never started.
  std::optional<int64_t> setup_ms;
  // A root worker's run: the uid and gid it was leased (identity/). Unset: the worker's own.
  std::optional<uint32_t> host_uid, host_gid;
  int64_t ended_ms = 0;
  // What the run used, read from its cgroup after the run and before the cgroup is removed
  // (limits/run_cgroup.h); empty without one. "usage" in status.json, absent when empty.
  RunUsage usage;
};
// Written atomically (write, fsync, rename, fsync the directory): a reader sees the whole
// status or none, also after a crash.
Status WriteRunStatus(const RunDir& dir, const RunStatus& status);
// kNotFound while the run has not ended.
Result<RunStatus> ReadRunStatus(const RunDir& dir);

}  // namespace codespace
