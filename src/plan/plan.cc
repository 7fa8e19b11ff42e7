#include "plan/plan.h"

#include <fmt/format.h>

namespace codespace {

std::string_view PlanName(Plan plan) {
  switch (plan) {
    case Plan::kSevered: return "severed";
    case Plan::kFiltered: return "filtered";
    case Plan::kShared: return "shared";
    case Plan::kRefused: return "refused";
  }
  return "?";
}

Result<Plan> ParsePlan(std::string_view text) {
  for (Plan p : {Plan::kSevered, Plan::kFiltered, Plan::kShared, Plan::kRefused}) {
    if (PlanName(p) == text) return p;
  }
  return InvalidArgumentError(fmt::format("unknown plan \"{}\"", text));
}

std::string_view NetworkPostureName(NetworkPosture posture) {
  switch (posture) {
    case NetworkPosture::kNotRun: return "none";
    case NetworkPosture::kFiltered: return "filtered";
    case NetworkPosture::kSevered: return "severed";
    case NetworkPosture::kShared: return "shared";
  }
  return "?";
}

Result<NetworkPosture> ParseNetworkPosture(std::string_view text) {
  for (NetworkPosture p : {NetworkPosture::kNotRun, NetworkPosture::kFiltered,
                           NetworkPosture::kSevered, NetworkPosture::kShared}) {
    if (NetworkPostureName(p) == text) return p;
  }
  return InvalidArgumentError(fmt::format("unknown network posture \"{}\"", text));
}

NetworkPosture PostureOfPlan(Plan plan) {
  switch (plan) {
    case Plan::kSevered: return NetworkPosture::kSevered;
    case Plan::kFiltered: return NetworkPosture::kFiltered;
    case Plan::kShared: return NetworkPosture::kShared;
    case Plan::kRefused: return NetworkPosture::kNotRun;
  }
  return NetworkPosture::kNotRun;
}

PlanDecision DecidePlan(const HostFacts& facts, SandboxEgressPolicy policy) {
  // `open` asks for the worker's own network: nothing to enforce, so every host can run it.
  if (policy == SandboxEgressPolicy::kOpen) return {Plan::kShared, facts.confines, ""};

  if (facts.confines) {
    if (policy == SandboxEgressPolicy::kNone) return {Plan::kSevered, true, ""};
    // The allowlist fails closed to no egress: bubblewrap severs what we cannot filter.
    if (HostFiltersAllowlist(facts)) return {Plan::kFiltered, true, ""};
    return {Plan::kSevered, true, facts.verdict.unavailable_reason};
  }

  // Unconfined: only our own namespace setup can enforce anything, and it needs the tools.
  if (!facts.tools()) {
    return {Plan::kRefused, false,
            fmt::format("egress \"{}\" cannot be enforced on this host: bubblewrap does not "
                        "confine ({}) and the filtered-egress tools are missing ({})",
                        EgressPolicyName(policy), facts.confine_error,
                        facts.filter.tools_error)};
  }
  if (policy == SandboxEgressPolicy::kNone) return {Plan::kSevered, false, ""};
  // HostFiltersAllowlist is tools alone here; the setup filters the run or aborts it.
  return {Plan::kFiltered, false, ""};
}

}  // namespace codespace
