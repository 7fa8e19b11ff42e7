// The plan: one pure function of (host facts, egress policy). Admission and launch both call it,
// so a run is launched exactly as it was admitted.
//
// | confines | tools | CanFilter | none      | allowlist                     | open   |
// |----------|-------|-----------|-----------|-------------------------------|--------|
// | yes      | –     | yes       | Severed   | Filtered                      | Shared |
// | yes      | –     | no        | Severed   | Severed (NetworkSevered+why)  | Shared |
// | no       | yes   | –         | Severed*  | Filtered*                     | Shared |
// | no       | no    | –         | Refused   | Refused                       | Shared |
// * by namespace, without bubblewrap: the setup severs/filters it or aborts the launch.
#pragma once

#include <string>
#include <string_view>

#include "policy/egress_policy.h"
#include "posture/host_facts.h"

namespace codespace {

enum class Plan { kSevered, kFiltered, kShared, kRefused };
std::string_view PlanName(Plan plan);  // "severed" | "filtered" | "shared" | "refused"
Result<Plan> ParsePlan(std::string_view text);

// The network a run gets, as its record says it: filtered, severed (= NetworkSevered), shared.
// A refused run has none.
enum class NetworkPosture { kNone, kFiltered, kSevered, kShared };
std::string_view NetworkPostureName(NetworkPosture posture);  // "none" | "filtered" | ...
Result<NetworkPosture> ParseNetworkPosture(std::string_view text);
NetworkPosture PostureOfPlan(Plan plan);

struct PlanDecision {
  Plan plan = Plan::kRefused;
  // True: bubblewrap confines the run (its own user, pid, mount and, unless Shared, network
  // namespaces). False: the launcher itself severs or filters by namespace, without bubblewrap.
  bool confined = false;
  // Why the run got less than it asked for, or was refused: FilterUnavailableReason for a
  // severed allowlist run; the missing pieces for a refusal. Empty otherwise.
  std::string reason;

  friend bool operator==(const PlanDecision&, const PlanDecision&) = default;
};

PlanDecision DecidePlan(const HostFacts& facts, SandboxEgressPolicy policy);

}  // namespace codespace
