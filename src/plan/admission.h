// Admission: decides a run before anything is spent on it. Pure: the same facts and spec always
// give the same answer, and launch re-reads the same decision rather than deciding again.
#pragma once

#include <string>
#include <string_view>

#include "plan/plan.h"
#include "posture/host_facts.h"
#include "run/run_spec.h"

namespace codespace {

// The network namespace a filtered run gets: a pure function of its id ("cs-" + 12 hex digits),
// so that admission can predict it and teardown can find it by name after a crash.
std::string NamespaceNameForRun(std::string_view run_id);

struct Admission {
  bool admitted = false;
  PlanDecision decision;
  std::string namespace_name;  // predicted for a Filtered plan; empty otherwise
  std::string reason;          // why refused, or why severed; empty otherwise
  // The limits the run gets: its own, else the worker's defaults (limits_policy.h DecideLimits).
  // The record's spec holds these.
  RunLimits limits;

  friend bool operator==(const Admission&, const Admission&) = default;
};

// admit(run) → {admitted, plan, namespace, reason}. Refuses a spec that is not runnable (empty
// argv, relative workspace), a plan the host cannot enforce, and limits it cannot enforce or
// above the worker's maxima.
Admission Admit(const HostFacts& facts, const RunSpec& spec, std::string_view run_id);

}  // namespace codespace
