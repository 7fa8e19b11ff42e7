// The launcher: starts a run the way its plan says, waits for it, and reports how it ended.
//
//   Severed, confined     bubblewrap with its own network namespace (loopback only)
//   Shared,  confined     bubblewrap on the worker's network
//   Severed, unconfined   no bubblewrap: the command in a network namespace of its own
//                         (unshare), or aborted when none can be made
//   Shared,  unconfined   the command on the worker's network, environment cleared
//   Filtered, confined    bubblewrap inside the run's own filtered namespace (net/): its
//                         allowlist firewall and DNS gate; the sandbox holds no capability in
//                         the namespace that owns them
//   Filtered, unconfined  the command in that namespace, capabilities dropped (root only)
//   A filtered setup that fails aborts the run before its command starts: never shared.
//   Refused               never launched
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "net/address_pool.h"
#include "net/filtered_netns.h"
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
  // Filtered plans: the namespace admission predicted, and how to build it.
  std::string namespace_name;
  AddressPool pool = AddressPool::Default();
  std::string upstream_dns;  // empty: /etc/resolv.conf's first nameserver
  std::function<Status(SetupStep)> before_setup_step;  // test seam (failure injection)
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
