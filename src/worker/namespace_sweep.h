// The start-up sweep: removes, by name, what filtered runs of this store left behind after they
// finished (a worker that died before tearing a run's network down leaves its namespace, veth
// and NAT table). Only runs this store knows as finished are touched: a namespace of another
// worker, or of a run still in flight, is left alone.
#pragma once

#include <string>
#include <vector>

#include "posture/host_facts.h"
#include "store/run_store.h"

namespace codespace {

struct SweepResult {
  std::vector<std::string> removed;  // namespace names torn down
  std::vector<std::string> errors;   // one line each, for the log
  std::vector<std::string> removed_cgroups;  // finished runs' cgroups removed (cgroup_sweep.h)
};

// Keyed on the tools alone (SPEC): a host that can no longer filter — it lost forwarding, or
// its namespace privilege — must still clean up what it made when it could. A finished run
// whose supervisor is still alive (it records the run first and tears its network down after)
// is left to that supervisor: its run directory's lock under `state_dir` says so.
SweepResult SweepFinishedRunNamespaces(RunStore& store, const HostFacts& facts,
                                       const std::string& state_dir);

}  // namespace codespace
