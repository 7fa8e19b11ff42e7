// The launcher: starts a run the way its plan says, waits for it, and reports how it ended.
//
//   Severed, confined     bubblewrap with its own network namespace (loopback only)
//   Shared,  confined     bubblewrap on the worker's network
//   Severed, unconfined   no bubblewrap: the command in a network namespace of its own
//                         (unshare), or aborted when none can be made
//   Shared,  unconfined   the command on the worker's network, environment cleared
//   Filtered              filtered egress is its own subsystem (net/); until it exists the run
//                         is aborted before its command starts — never launched shared
//   Refused               never launched
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "run/run_spec.h"
#include "sandbox/run_outcome.h"

namespace codespace {

struct LaunchRequest {
  std::string run_id;
  RunSpec spec;
  PlanDecision decision;  // from Admit(): launch does not decide again
  std::string bwrap_path;
  std::string init_path;  // codespace-init, bound into the sandbox
  std::vector<std::string> hidden_dirs;  // masked inside the sandbox (the state dir)
  int stdout_fd = 1;
  int stderr_fd = 2;
};

// Runs to completion (or timeout) and returns how the run ended. Never throws, never launches a
// run with more network than its plan: every setup failure is an aborted outcome with a reason.
RunOutcome LaunchAndWait(const LaunchRequest& request);

// Where codespace-init is: CODESPACE_INIT_PATH, else beside the running binary, else
// ../libexec/codespace/ relative to it.
std::string FindSandboxInit();

}  // namespace codespace
