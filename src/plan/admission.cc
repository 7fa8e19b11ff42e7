#include "plan/admission.h"

#include <fmt/format.h>

namespace codespace {

std::string NamespaceNameForRun(std::string_view run_id) {
  // Run ids are 16 hex digits; 12 of them keep the name short enough that the veth names
  // derived from it ("csv" + 12 + one letter) fit IFNAMSIZ. For any other id, FNV-1a of it.
  bool hex = run_id.size() >= 12;
  for (size_t i = 0; hex && i < 12; ++i) {
    char c = run_id[i];
    hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  }
  if (hex) return fmt::format("cs-{}", run_id.substr(0, 12));
  uint64_t h = 14695981039346656037ull;
  for (char c : run_id) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return fmt::format("cs-{:012x}", h & 0xffffffffffffull);
}

Admission Admit(const HostFacts& facts, const RunSpec& spec, std::string_view run_id) {
  Admission a;
  a.decision = DecidePlan(facts, spec.egress.mode);
  auto refuse = [&](std::string why) {
    a.admitted = false;
    a.decision.plan = Plan::kRefused;
    a.reason = std::move(why);
    return a;
  };
  if (spec.argv.empty() || spec.argv[0].empty()) return refuse("the run has no command");
  if (spec.workspace.empty() || spec.workspace[0] != '/') {
    return refuse(fmt::format("the workspace must be an absolute path (got \"{}\")",
                              spec.workspace));
  }
  // The workspace is bound read-write: never the whole root, nor the kernel's or the
  // sandbox's own file systems.
  for (std::string_view forbidden : {"/proc", "/sys", "/dev"}) {
    std::string_view ws = spec.workspace;
    if (ws == forbidden || (ws.substr(0, forbidden.size()) == forbidden &&
                            ws.size() > forbidden.size() && ws[forbidden.size()] == '/')) {
      return refuse(fmt::format("the workspace may not be under {} (got \"{}\")", forbidden,
                                spec.workspace));
    }
  }
  if (spec.workspace == "/") return refuse("the workspace may not be the root directory");
  if (spec.egress.mode == SandboxEgressPolicy::kAllowlist && spec.egress.allowlist.empty()) {
    return refuse("the allowlist policy needs at least one --allow entry");
  }
  if (!ConfinementRefusal(facts).empty()) return refuse(ConfinementRefusal(facts));
  if (!SeccompRefusal(facts).empty()) return refuse(SeccompRefusal(facts));
  a.reason = a.decision.reason;
  if (a.decision.plan == Plan::kRefused) {
    a.admitted = false;
    return a;
  }
  // Limits last: a run that cannot be launched at all says why first.
  LimitsDecision limits = DecideLimits(facts.limits, a.decision.confined, spec.limits);
  if (!limits.admitted) return refuse(limits.reason);
  a.limits = limits.limits;
  a.admitted = true;
  if (a.decision.plan == Plan::kFiltered) a.namespace_name = NamespaceNameForRun(run_id);
  return a;
}

}  // namespace codespace
