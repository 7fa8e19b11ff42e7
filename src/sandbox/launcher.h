// The launcher: starts a run the way its plan says, pumps its output, stops it when asked or
// when its time is up, and reports how it ended.
//
//   Severed, confined     bubblewrap with its own network namespace (loopback only)
//   Shared,  confined     bubblewrap on the worker's network
//   Filtered, confined    bubblewrap inside the run's own filtered namespace (net/): its
//                         allowlist firewall and DNS gate; the sandbox holds no capability in
//                         the namespace that owns them
//   Severed, unconfined   no bubblewrap: the command in a network namespace of its own
//                         (unshare), or aborted when none can be made
//   Filtered, unconfined  the command in the run's filtered namespace (root only)
//   Shared,  unconfined   the command on the worker's network
//   Refused               never launched
// A filtered setup that fails aborts the run before its command starts: never shared.
// Unconfined commands hold no capability either (all sets emptied, no_new_privs).
//
// Every command runs under codespace-init, which reports "started" and then exactly how the
// command ended. The run is over when its main process has exited *and* every writer of its
// output has closed (background descendants included), or when `drain_grace` after the main
// exit has passed; then whatever is left of it is killed — the whole pid namespace when
// confined, every descendant (reparented to this process, a subreaper) when not.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/address_pool.h"
#include "net/filtered_netns.h"
#include "plan/plan.h"
#include "run/run_spec.h"
#include "sandbox/output_sink.h"
#include "run/run_outcome.h"

namespace codespace {

struct LaunchRequest {
  std::string run_id;
  RunSpec spec;
  PlanDecision decision;  // from Admit(): launch does not decide again
  std::string bwrap_path;
  std::string init_path;                 // codespace-init, bound into the sandbox
  std::vector<std::string> hidden_dirs;  // masked inside the sandbox (the state dir)
  // Filtered plans: the namespace admission predicted, and how to build it.
  std::string namespace_name;
  AddressPool pool = AddressPool::Default();
  std::string upstream_dns;                            // empty: /etc/resolv.conf's first nameserver
  std::function<Status(SetupStep)> before_setup_step;  // test seam (failure injection)

  // The worker side of the broker relay (a unix socket the supervisor's bridge listens on);
  // empty: no broker. Bound into the sandbox; the in-sandbox relay announces itself in
  // CODESPACE_BROKER_URL and in each of `broker_env`.
  std::string broker_socket;
  std::vector<std::string> broker_env;

  // A root worker's run (identity/run_identity.h): the leased uid and gid bubblewrap (or,
  // unconfined, codespace-init) starts as; -1: the worker's own. `workspace_mount_fd`: the
  // detached idmapped workspace, attached by the child at `workspace_source` when confined
  // (bubblewrap binds it over the workspace) or over the workspace itself when not.
  uid_t run_uid = static_cast<uid_t>(-1);
  gid_t run_gid = static_cast<gid_t>(-1);
  int workspace_mount_fd = -1;
  std::string workspace_source;

  // The command's stdin (fd 0 inside the sandbox); -1: /dev/null. `codespace run -i` passes its
  // own stdin down (through the forked supervisor), so the command reads what the caller pipes.
  int stdin_fd = -1;
  // `codespace run -t`: the master of the run's own pty, whose slave is `stdin_fd`. The slave
  // becomes the command's stdin, stdout and stderr and its controlling terminal (codespace-init
  // --tty); the command's output is read from the master into stdout_sink (stderr stays empty:
  // a terminal has one stream). The launcher closes `stdin_fd` once the sandbox holds it, so
  // the master reads EOF when the sandbox is gone. -1: no terminal.
  int tty_master_fd = -1;
  OutputSink* stdout_sink = nullptr;  // required
  OutputSink* stderr_sink = nullptr;  // required
  // Readable (an eventfd, a pipe) → cancel: SIGTERM, `stop_grace`, then SIGKILL. -1: none.
  int cancel_fd = -1;
  std::chrono::milliseconds stop_grace{5000};
  // After the main process exits: how long background writers may go on.
  std::chrono::milliseconds drain_grace{5000};
  // Called once the command is running, with the pid (in this pid namespace) of the process
  // whose death ends the sandbox: bubblewrap's pid-namespace init when confined, codespace-init
  // when not. The supervisor records it so that a successor can kill what is left.
  std::function<void(pid_t)> on_started;
  // Filtered plans: when set, the run's network is quiesced once the run has ended (DNS gate
  // stopped, counters read into the outcome) and handed over here instead of torn down, so
  // that the caller can record how the run ended first and tear the network down after
  // (Teardown, or the destructor). Kernel teardown of a veth and a table takes tens of ms.
  std::unique_ptr<FilteredEgressNetns>* keep_network = nullptr;
  // Limits (issue 15): the cgroup.procs descriptors of the run's cgroup (limits/run_cgroup.h,
  // made by the supervisor). The spawned bubblewrap (or, unconfined, codespace-init) writes
  // itself into them between fork and exec. Empty: the run has no cgroup; a run whose spec asks
  // for a memory, process or CPU limit is then aborted, never run without it.
  std::vector<int> cgroup_procs_fds;
};

// Runs to completion (or timeout, or cancel) and returns how the run ended. Never launches a run
// with more network than its plan: every setup failure is an aborted outcome with a reason.
RunOutcome LaunchAndWait(const LaunchRequest& request);

// Where codespace-init is: CODESPACE_INIT_PATH, else beside the running binary, else
// ../libexec/codespace/ relative to it.
std::string FindSandboxInit();

// bubblewrap's own environment (never the command's) names the run it sandboxes.
inline constexpr const char kBwrapRunEnv[] = "CODESPACE_BWRAP_OF_RUN";

// Kills, with SIGKILL, every process whose environment names `run_id` in kBwrapRunEnv. A
// supervisor killed in the microseconds between bubblewrap arming --die-with-parent and telling
// its child to go on leaves that child waiting forever on bubblewrap's word, in new namespaces
// and reparented away: nothing else leads to it. Whoever records the run lost calls this.
void KillStrayBubblewraps(std::string_view run_id);

// Kills, with SIGKILL, every process whose parent is this process (repeatedly, as killing one
// reparents its children here when this process is a subreaper), except `spare`. Unconfined
// runs have no pid namespace to kill whole; this is how their trees go.
void KillChildren(pid_t spare);

}  // namespace codespace
