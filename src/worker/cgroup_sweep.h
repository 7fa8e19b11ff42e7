// The start-up sweep's cgroup half: a run's cgroup is removed by its supervisor after the run;
// one that died first (a crash, a kill -9) leaves codespace/<run id> behind, perhaps with
// processes in it (an unconfined run's daemon). Only runs this store knows as finished and that
// no supervisor holds are touched: another worker's runs, and runs in flight, are left alone.
#pragma once

#include <string>
#include <vector>

#include "posture/host_facts.h"
#include "store/run_store.h"

namespace codespace {

// Kills what is in each such cgroup and removes it; the directories removed go to `removed`,
// failures (one line each) to `errors`.
void SweepFinishedRunCgroups(RunStore& store, const HostFacts& facts, const std::string& state_dir,
                             std::vector<std::string>* removed, std::vector<std::string>* errors);

}  // namespace codespace
