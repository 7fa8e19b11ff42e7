// The supervisor of one run: a process of its own, in its own session, that outlives the worker
// which started it. It owns the run's sandbox (and its namespace, DNS gate and relay), writes the
// run's output to files in its run directory as it comes, seals them once every writer has
// closed, writes how the run ended (status.json, atomically), tears the network down, and exits.
// It never writes the record: whoever watches it (a worker, or `codespace run`) does, from
// status.json — so a supervisor that dies leaves a run a successor can still judge.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/process.h"
#include "store/run_record.h"
#include "supervisor/run_dir.h"

namespace codespace {

// Every supervisor's process name (comm; `pgrep -x cs-supervisor`), however it was started.
inline constexpr char kSupervisorProcessName[] = "cs-supervisor";

struct SupervisorArgs {
  std::string state_dir;
  std::string run_id;
  bool confined = false;
  std::string bwrap_path;
  std::string init_path;
  std::chrono::milliseconds drain_grace{5000};  // after the main process: background writers
  std::chrono::milliseconds stop_grace{5000};   // cancel/timeout: SIGTERM → SIGKILL
  // ForkSupervisor only (never passed through argv): the write end of the caller's pipe. The
  // supervisor writes one byte to it once status.json is written, before a filtered run's
  // teardown, and the caller reads its outcome then. (Watching the run directory with inotify
  // instead cost the caller ~12 ms at exit while a teardown ran: closing an inotify descriptor
  // waits for an SRCU grace period.)
  int recorded_fd = -1;
  // ForkSupervisor only: the caller's stdin, passed on to the command as its fd 0 (`run -i`);
  // -1: the command's stdin is /dev/null.
  int stdin_fd = -1;
  // ForkSupervisor only, with stdin_fd the slave: the master of the run's pty (`run -t`).
  int tty_master_fd = -1;
};

// argv for `codespace __supervise ...` (the hidden subcommand that runs SuperviseMain).
std::vector<std::string> SupervisorArgv(const std::string& codespace_binary,
                                        const SupervisorArgs& a);
// Parses what SupervisorArgv wrote (argv after the subcommand name).
Result<SupervisorArgs> ParseSupervisorArgs(const std::vector<std::string>& args);

// Starts a supervisor detached from the caller (its own session; not the caller's child: an
// intermediate process forks it and exits), and returns its identity once it is running.
Result<ProcessIdentity> StartSupervisor(const std::string& codespace_binary,
                                        const SupervisorArgs& a);

// The same, without exec: this process forks the supervisor (its own session, no controlling
// terminal), which runs Supervise with `record` as created — skipping a second load of the
// codespace binary and a read of the record back from the store (~5 ms of a short run). Only for
// a single-threaded caller (the foreground `codespace run`): a fork copies one thread, and any
// lock another thread held stays held. A caller with threads gets FailedPrecondition. `record`
// null: the supervisor reads it from the store (the worker's spawner, spawner.h).
Result<ProcessIdentity> ForkSupervisor(const SupervisorArgs& a, const RunRecord* record);

// The body of `codespace __supervise`: detaches (forks the supervisor, reports its pid on fd 3)
// and supervises. Returns the process exit code.
int SuperviseMain(const SupervisorArgs& args);

}  // namespace codespace
