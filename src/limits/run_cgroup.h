// The side-effect half of a run's cgroup (cgroup_plan.h decides what is written where):
// finding the hierarchy and the worker's subtree, making codespace/<run id> before the sandbox
// starts, handing its cgroup.procs descriptors to Spawn (the child writes itself in between fork
// and exec: no process of the run is ever outside it), reading the usage after the run, killing
// what is left and removing it — and the start-up sweep that removes what a crash left.
//
// Where: under the worker's own cgroup in each hierarchy (from /proc/self/cgroup), so that a
// worker inside a limited cgroup (a container, a systemd unit with Delegate=yes) keeps its runs
// inside its own limit. v1: <root>/<controller><own path>/codespace/<run id> for memory, pids,
// cpu and cpuacct; v2: <root><own path>/codespace/<run id>. `root` is a parameter
// (CODESPACE_CGROUP_ROOT): tests point it at a directory tree, and a root that does not exist
// is a host with limits=none.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "limits/cgroup_plan.h"
#include "limits/limits_policy.h"
#include "run/run_limits.h"

namespace codespace {

struct CgroupLayout {
  CgroupHierarchy hierarchy = CgroupHierarchy::kNone;
  std::string reason;  // why kNone
  // controller → the directory that holds "codespace/" (v2: the one entry, key "").
  std::map<std::string, std::string> parents;
};

// Reads `root` and `self_cgroup_path` (/proc/self/cgroup; a parameter for tests). v2 when `root`
// is a cgroup2 mount (cgroup.controllers) whose subtree offers memory, pids and cpu; else v1
// when memory, pids, cpu and cpuacct are mounted under it; else none, with the reason. The
// subtree must be writable by this process (access(W_OK): nothing is created by looking).
CgroupLayout DetectCgroupLayout(const std::string& root,
                                const std::string& self_cgroup_path = "/proc/self/cgroup");

// "<parent>/codespace/<run id>".
std::string RunCgroupDir(const std::string& parent, const std::string& run_id);

class RunCgroup {
 public:
  // Makes the run's cgroup in every controller (codespace/ first, 0755; on v2 with the
  // controllers enabled in the parents' cgroup.subtree_control), writes its limits
  // (PlanCgroupWrites) and opens each cgroup.procs for writing. Any failure removes what was
  // made and is an error naming the file: the run must then not start.
  static Result<std::unique_ptr<RunCgroup>> Create(const CgroupLayout& layout,
                                                   const std::string& run_id,
                                                   const RunLimits& limits);
  ~RunCgroup();
  RunCgroup(const RunCgroup&) = delete;
  RunCgroup& operator=(const RunCgroup&) = delete;

  // For SpawnOptions::cgroup_procs_fds: valid while this object lives.
  std::vector<int> procs_fds() const;
  // The directories, one per distinct controller directory.
  const std::vector<std::string>& dirs() const { return dirs_; }
  // What the run used (before KillAndRemove).
  RunUsage ReadUsage() const;
  // SIGKILLs every process still in it (v2: cgroup.kill; v1: cgroup.procs, listed until empty),
  // then removes the directories. Idempotent.
  Status KillAndRemove();

 private:
  RunCgroup(CgroupLayout layout) : layout_(std::move(layout)) {}
  CgroupLayout layout_;
  std::vector<std::string> dirs_;                     // distinct directories made
  std::map<std::string, std::string> by_controller_;  // controller → its directory
  std::vector<UniqueFd> procs_;
  bool removed_ = false;
};

// The supervisor's step: the run's cgroup under `cgroup_root` (CODESPACE_CGROUP_ROOT). Null when
// the host has no usable hierarchy and the run asks for no cgroup limit (it runs without one and
// its usage is not measured); an error when it asks for one and the cgroup cannot be made (the
// run must then be aborted, never launched unlimited).
Result<std::unique_ptr<RunCgroup>> MakeRunCgroup(const std::string& cgroup_root,
                                                 const std::string& run_id,
                                                 const RunLimits& limits);

// Kills what is in run `run_id`'s cgroup and removes it, in every controller, by name (a run
// whose supervisor died: whoever records it lost calls this). Missing is fine.
Status RemoveRunCgroupByName(const std::string& cgroup_root, const std::string& run_id);

// Kills what is in `dir` (a run cgroup directory) and removes it.
Status KillAndRemoveCgroupDir(const std::string& dir);

// The start-up sweep: every codespace/<run id> under `layout` for which `finished(run id)` is
// true (the store knows it ended, and no supervisor holds it) is killed and removed. Returns the
// directories removed; failures go to `errors`.
std::vector<std::string> SweepRunCgroups(const CgroupLayout& layout,
                                         const std::function<bool(const std::string&)>& finished,
                                         std::vector<std::string>* errors);

}  // namespace codespace
