// The pure half of a run's cgroup: which controller files get which values for a RunLimits on a
// hierarchy, which files hold the usage and how they read, and whether a run was ended by its
// memory limit. run_cgroup.h does the writing and reading; this decides what.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "limits/limits_policy.h"
#include "run/run_limits.h"
#include "run/run_outcome.h"

namespace codespace {

// The controllers a run's cgroup is made in. v1: one directory per controller (cpuacct for the
// CPU seconds; on hosts that mount "cpu,cpuacct" together both name the same directory). v2:
// one directory, these enabled in its parents' cgroup.subtree_control.
std::vector<std::string> CgroupControllers(CgroupHierarchy h);  // v1: memory pids cpu cpuacct

// One write into the run's cgroup. `controller` picks the v1 directory (empty on v2).
// `required`: a write that fails aborts the run (the limit would not hold). Optional writes are
// for files a kernel may lack without the limit failing (v1 memsw without swap accounting: then
// there is no swap to account; v2 memory.swap.max without swap).
struct CgroupWrite {
  std::string controller;
  std::string file;
  std::string value;
  bool required = true;
  friend bool operator==(const CgroupWrite&, const CgroupWrite&) = default;
};

// In order: on v1 memory.limit_in_bytes before memory.memsw.limit_in_bytes (the kernel keeps
// memsw >= limit). A zero field writes nothing (the cgroup is then only for usage).
std::vector<CgroupWrite> PlanCgroupWrites(const RunLimits& limits, CgroupHierarchy h);

// The files the usage is read from, as (controller, file).
std::vector<std::pair<std::string, std::string>> UsageFiles(CgroupHierarchy h);

// Usage from those files' texts (keyed "controller/file"; v2 "file"). A missing or malformed file
// leaves its fields unset. `clock_ticks_per_second`: USER_HZ, for v1's cpuacct.stat.
RunUsage ParseUsage(CgroupHierarchy h, const std::map<std::string, std::string>& texts,
                    long clock_ticks_per_second);

// A run whose command was killed by SIGKILL while the OOM killer killed in its cgroup ended at
// its memory limit: recorded so ("killed: memory limit 512 MiB reached"), with usage.limit_kill
// set, instead of as a bare signal 9. Anything else is returned as it was.
RunOutcome ClassifyLimitKill(RunOutcome outcome, const RunLimits& limits, RunUsage* usage);

}  // namespace codespace
