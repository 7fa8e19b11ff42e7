// The worker side of durable runs: claiming a queued run and starting its supervisor, watching
// supervisors (also ones a previous worker started), and turning a finished supervisor's
// status.json into the run's record. `codespace worker` loops over these; `codespace run` uses
// the same functions for one run in the foreground.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "posture/host_facts.h"
#include "store/run_store.h"
#include "supervisor/run_dir.h"
#include "supervisor/spawner.h"
#include "supervisor/supervisor.h"

namespace codespace {

struct WorkerConfig {
  std::string state_dir;
  std::string codespace_binary;  // this binary, for `__supervise`
  std::string init_path;
  std::chrono::milliseconds drain_grace{5000};
  std::chrono::milliseconds stop_grace{5000};
  std::chrono::milliseconds poll_interval{100};
  // How often the worker looks again at every run recorded running that it does not watch: one
  // whose foreground `codespace run` was killed, one whose supervisor died. Not only at start.
  std::chrono::milliseconds recheck_interval{2000};
  // Retention (retention.h): runs that ended longer ago than this are removed, records and logs,
  // at the worker's start and then every prune_interval. nullopt: kept until removed by hand.
  std::optional<std::chrono::seconds> prune_after;
  std::chrono::milliseconds prune_interval{60000};
  // Fork supervisors here instead of exec'ing `codespace __supervise` (ForkSupervisor): only for
  // a single-threaded caller, the foreground `codespace run`. The worker, with its API threads,
  // has its spawner fork them instead (below).
  bool fork_supervisor = false;
  // With fork_supervisor: where the supervisor says its run is recorded (SupervisorArgs).
  int recorded_fd = -1;
  // With fork_supervisor: the caller's stdin for the command (`run -i`); -1: /dev/null.
  int stdin_fd = -1;
  // With fork_supervisor and stdin_fd the slave: the master of the run's pty (`run -t`).
  int tty_master_fd = -1;
  // The worker's: forks supervisors for it (spawner.h); exec is the fallback when it fails.
  SupervisorSpawner* spawner = nullptr;
};

// queued → running (compare-and-set: a run is claimed once, by one worker), then its supervisor
// is started. The record it returns is the running one.
Result<RunRecord> ClaimAndStart(RunStore& store, const WorkerConfig& config, const HostFacts& facts,
                                const RunRecord& queued, ProcessIdentity* supervisor);

// Starts the supervisor of a run recorded running a moment ago by its caller (CreateRunning);
// when it cannot start, the record says aborted with the reason.
Status StartClaimed(RunStore& store, const WorkerConfig& config, const HostFacts& facts,
                    const RunRecord& running, ProcessIdentity* supervisor);

// Starts the supervisor of a run that is already `running` (claimed, but its supervisor never
// started: the worker died in between).
Result<ProcessIdentity> StartSupervisorFor(const WorkerConfig& config, const HostFacts& facts,
                                           const RunRecord& running);

enum class RunCheck {
  kRecorded,      // it ended: its record now says how
  kStillRunning,  // its supervisor is alive
  kNeverStarted,  // claimed, but no supervisor ever ran for it: start one
};
// Looks at a running run's directory: status.json → recorded; supervisor alive → still running;
// no supervisor identity → never started; supervisor dead without status → recorded `lost`
// (what is left of its sandbox killed, its namespace torn down by name — keyed on tools).
Result<RunCheck> CheckRun(RunStore& store, const WorkerConfig& config, const HostFacts& facts,
                          const RunRecord& running);

// Asks a run to stop: queued → cancelled at once; running → a `cancel` file and SIGTERM to its
// supervisor (which stops the sandbox: SIGTERM, grace, SIGKILL).
Status RequestCancel(RunStore& store, const std::string& state_dir, const std::string& run_id);

// Where a run's output is kept, while it runs and after: its stdout and stderr log files (the API
// streams them; the run directory's layout stays the supervisor's business).
struct RunLogPaths {
  std::string stdout_path;
  std::string stderr_path;
};
RunLogPaths LogPathsOf(const std::string& state_dir, const std::string& run_id);

// Wakes the worker loop at once (an eventfd): the API calls Notify() after it queues a run, so
// a submitted run starts now rather than at the next look at the store (poll_interval, which
// still finds runs queued by anything else).
class WorkerWake {
 public:
  static Result<WorkerWake> Create();
  void Notify() const;
  int fd() const { return fd_.get(); }
  void Drain() const;

 private:
  explicit WorkerWake(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// `codespace worker`: probes done by the caller; sweeps, re-binds, then claims and watches until
// `stop` is set. `wake` (may be null) cuts the wait for the next poll short.
Status RunWorker(RunStore& store, const WorkerConfig& config, const HostFacts& facts,
                 const std::atomic<bool>& stop, const WorkerWake* wake = nullptr);

}  // namespace codespace
