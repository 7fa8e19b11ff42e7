// The plan: one pure function of (host facts, egress policy). Admission and launch both call it,
// so a run is launched exactly as it was admitted.
//
// The network axis is told in three steps, one word each:
//   SandboxEgressPolicy (policy/)  what the run asked for: none | allowlist | open
//   Plan (here)                    what this host will do with it: severed | filtered | shared |
//                                  refused (decided from the host facts, posture/)
//   NetworkPosture (here)          what the run got, as its record says: severed | filtered |
//                                  shared, or not-run (a refused run never ran: "none" in its
//                                  record's JSON and database text)
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

// The network a run got, as its record says it: filtered, severed (= NetworkSevered), shared.
// A refused run was never run: kNotRun, written "none" (the record's text, kept as it was; not
// to be read as the egress policy `none`, which is severed).
enum class NetworkPosture { kNotRun, kFiltered, kSevered, kShared };
std::string_view NetworkPostureName(NetworkPosture posture);  // "none" (kNotRun) | "filtered" | ...
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
