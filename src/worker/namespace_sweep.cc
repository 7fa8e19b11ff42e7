#include "worker/namespace_sweep.h"

#include <dirent.h>
#include <fmt/format.h>
#include <unistd.h>

#include "net/filtered_netns.h"
#include "net/netns.h"
#include "supervisor/run_dir.h"
#include "worker/cgroup_sweep.h"

namespace codespace {

namespace {

bool IsRunNamespaceName(const std::string& name) {
  if (name.size() != 15 || name.rfind("cs-", 0) != 0) return false;
  for (size_t i = 3; i < name.size(); ++i) {
    char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

SweepResult SweepFinishedRunNamespaces(RunStore& store, const HostFacts& facts,
                                       const std::string& state_dir) {
  SweepResult result;
  SweepFinishedRunCgroups(store, facts, state_dir, &result.removed_cgroups, &result.errors);
  if (!facts.tools()) return result;
  DIR* dir = ::opendir(kNetnsRunDir);
  if (!dir) return result;  // no namespaces at all
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (IsRunNamespaceName(name)) names.push_back(name);
  }
  ::closedir(dir);
  for (const auto& name : names) {
    auto run = store.FindByNamespace(name);
    if (!run.ok() || !IsTerminal(run->state)) continue;
    if (SupervisorLockHeld(RunDirFor(state_dir, run->id))) continue;  // tearing it down now
    // Looked at again now that no supervisor holds the run: the listing above may predate its
    // supervisor's own teardown, which ends (namespace gone) before the lock is let go.
    if (::access(fmt::format("{}/{}", kNetnsRunDir, name).c_str(), F_OK) != 0) continue;
    Status s = FilteredEgressNetns::TearDownNamespaceByName(name);
    if (s.ok()) {
      result.removed.push_back(name);
    } else {
      result.errors.push_back(fmt::format("run {}: {}", run->id, s.message()));
    }
  }
  return result;
}

}  // namespace codespace
