// RunRecord: the durable record of one run, and its state machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "plan/plan.h"
#include "run/log_digest.h"
#include "run/network_report.h"
#include "run/run_outcome.h"
#include "run/run_spec.h"

namespace codespace {

enum class RunState { kQueued, kRunning, kExited, kAborted, kRefused, kCancelled, kLost };
std::string_view RunStateName(RunState state);  // "queued", "running", ...
Result<RunState> ParseRunState(std::string_view text);
bool IsTerminal(RunState state);
// Runs only move forward: queued → running | aborted | refused | cancelled;
// running → exited | aborted | cancelled | lost. Terminal states never change.
bool IsAllowedTransition(RunState from, RunState to);

struct RunRecord {
  std::string id;
  RunSpec spec;
  Plan plan = Plan::kRefused;  // what this host would do with the run's egress policy
  NetworkPosture network = NetworkPosture::kNotRun;  // what it got (see plan.h)
  std::string namespace_name;                        // predicted by admission for a filtered plan
  RunState state = RunState::kQueued;
  std::optional<int> exit_code;  // set when the command exited
  std::optional<int> signal;     // set when the command was killed by a signal
  // Why the run was refused, aborted, severed (FilterUnavailableReason) or cancelled.
  std::string reason;
  NetworkReport network_report;  // a filtered run's DNS admissions, refusals, dropped packets
  LogDigest stdout_log;          // sealed: size and sha256 of the run's stdout file
  LogDigest stderr_log;
  int64_t created_ms = 0;  // Unix epoch milliseconds; 0 = not yet
  int64_t started_ms = 0;
  int64_t ended_ms = 0;
  // Sandbox and network setup, measured by the supervisor: from its launch to the sandbox
  // reporting started. Unset when the command never started (refused, aborted at setup,
  // cancelled while queued) or the run was recorded before setup was measured.
  std::optional<int64_t> setup_ms;
  // A root worker's run: the host uid and gid it ran as (leased, identity/). Unset: the
  // worker's own uid (an unprivileged worker), or the command never started.
  std::optional<int64_t> host_uid;
  std::optional<int64_t> host_gid;
  // The caller's name for the run (`--name`; empty: none), accepted wherever an id is.
  std::string name;
  // The key its submitter sent (`Idempotency-Key`; empty: none): one run per key, ever, in a
  // store (a UNIQUE index), so a retried submit whose answer was lost never runs it twice.
  std::string idempotency_key;
  // What the run used (its cgroup's peak memory, CPU seconds, peak processes, OOM kills) and
  // the limit that ended it, if one did. Empty when it had no cgroup.
  RunUsage usage;
  // The syscall filter the run is launched under (SeccompFilterName: "sha256:..."), named at
  // admission from its spec; empty for a run never admitted (and records from before it).
  std::string seccomp;

  friend bool operator==(const RunRecord&, const RunRecord&) = default;
};

// Fills a record's end from how the run ended: its state, code or signal, reason, and now as its
// end. The one mapping of a RunOutcome onto a record (the supervisor's and the worker's).
void ApplyOutcome(const RunOutcome& outcome, RunRecord* record);

// The exit status a finished record passes on (`codespace run`, `wait`): RunOutcome::ShellCode's
// mapping read back from the record — the command's code, 128+N for a signal, 125
// (kExitCodespaceFailed) when codespace failed, refused or lost the run.
int RecordShellCode(const RunRecord& record);

}  // namespace codespace
