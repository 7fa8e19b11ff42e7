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
  Plan plan = Plan::kRefused;
  NetworkPosture network = NetworkPosture::kNone;
  std::string namespace_name;  // predicted by admission for a filtered plan
  RunState state = RunState::kQueued;
  std::optional<int> exit_code;  // set when the command exited
  std::optional<int> signal;     // set when the command was killed by a signal
  // Why the run was refused, aborted, severed (FilterUnavailableReason) or cancelled.
  std::string reason;
  NetworkReport network_report;  // a filtered run's DNS admissions, refusals, dropped packets
  LogDigest stdout_log;  // sealed: size and sha256 of the run's stdout file
  LogDigest stderr_log;
  int64_t created_ms = 0;  // Unix epoch milliseconds; 0 = not yet
  int64_t started_ms = 0;
  int64_t ended_ms = 0;
  // Sandbox and network setup, measured by the supervisor: from its launch to the sandbox
  // reporting started. Unset when the command never started (refused, aborted at setup,
  // cancelled while queued) or the run was recorded before setup was measured.
  std::optional<int64_t> setup_ms;
  // The syscall filter the run is launched under (SeccompFilterName: "sha256:..."), named at
  // admission from its spec; empty for a run never admitted (and records from before it).
  std::string seccomp;

  friend bool operator==(const RunRecord&, const RunRecord&) = default;
};

}  // namespace codespace
