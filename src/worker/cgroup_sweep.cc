#include "worker/cgroup_sweep.h"

#include "limits/run_cgroup.h"
#include "run/run_spec.h"
#include "supervisor/run_dir.h"

namespace codespace {

void SweepFinishedRunCgroups(RunStore& store, const HostFacts& facts, const std::string& state_dir,
                             std::vector<std::string>* removed, std::vector<std::string>* errors) {
  if (facts.limits.hierarchy == CgroupHierarchy::kNone) return;
  CgroupLayout layout = DetectCgroupLayout(facts.limits.settings.cgroup_root);
  auto finished = [&](const std::string& id) {
    if (!IsValidRunId(id)) return false;
    auto run = store.Get(id);
    return run.ok() && IsTerminal(run->state) && !SupervisorLockHeld(RunDirFor(state_dir, id));
  };
  for (auto& dir : SweepRunCgroups(layout, finished, errors)) removed->push_back(std::move(dir));
}

}  // namespace codespace
