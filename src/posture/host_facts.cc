#include "posture/host_facts.h"

#include <fmt/format.h>

#include "base/quote.h"

namespace codespace {

FilterVerdict DecideFilter(const FilterParts& parts) {
  // The order is the order an operator fixes things in: install the tools, grant the namespace,
  // then enable forwarding. The reason names the first part that fails.
  if (!parts.tools) return {false, parts.tools_error};
  if (!parts.namespace_ok) return {false, parts.namespace_error};
  if (!parts.forwarding) return {false, parts.forwarding_error};
  return {true, ""};
}

bool HostFiltersAllowlist(const HostFacts& facts) {
  // Confined: severing is enforced by bubblewrap, so an allowlist run this host cannot filter is
  // severed, and only CanFilter may plan it Filtered. Unconfined: nothing would enforce a
  // severance, so the tools alone plan it Filtered; its setup then filters it or aborts.
  return facts.confines ? facts.can_filter() : facts.tools();
}

std::string_view AllowlistOutcomeWord(const HostFacts& facts) {
  if (facts.confines) return facts.can_filter() ? "filtered" : "severed";
  return facts.tools() ? "filtered-or-aborted" : "refused";
}

std::string PostureLine(const HostFacts& f) {
  std::string line =
      fmt::format("posture uid={} confines={} bwrap={}", f.uid, f.confines ? "yes" : "no",
                  f.bwrap_path.empty() ? "none" : f.bwrap_path);
  if (!f.confines) line += fmt::format(" confineError={}", QuoteForLine(f.confine_error));
  line += fmt::format(" tools={} canFilter={}", f.tools() ? "yes" : "no",
                      f.can_filter() ? "yes" : "no");
  if (!f.can_filter()) {
    line += fmt::format(" filterUnavailable={}", QuoteForLine(f.verdict.unavailable_reason));
  }
  line += fmt::format(" allowlist={}", AllowlistOutcomeWord(f));
  // The file-system view a run gets: its spec's (default unless it asks for host) where
  // bubblewrap confines; the host's own where nothing does (docs/view.md).
  line += fmt::format(" view={}", f.confines ? "default" : "host");
  if (f.require_confinement) line += " requireConfinement=yes";
  line += fmt::format(" identity={}", f.identity);
  if (!f.run_uids.empty()) line += fmt::format(" runUids={}", f.run_uids);
  if (!f.identity_error.empty())
    line += fmt::format(" identityError={}", QuoteForLine(f.identity_error));
  line += " " + LimitsPosture(f.limits);
  line += f.seccomp_error.empty()
              ? std::string(" seccomp=yes")
              : fmt::format(" seccomp=no seccompError={}", QuoteForLine(f.seccomp_error));
  return line;
}

std::string ConfinementRefusal(const HostFacts& f) {
  if (!f.identity_error.empty()) {
    return fmt::format("a root worker runs every run as a uid of its own, and cannot: {}",
                       f.identity_error);
  }
  if (!f.require_confinement || f.confines) return "";
  return fmt::format(
      "CODESPACE_REQUIRE_CONFINEMENT=1 but bubblewrap does not confine on this host ({}); "
      "install bubblewrap and allow unprivileged user namespaces, or unset "
      "CODESPACE_REQUIRE_CONFINEMENT",
      f.confine_error);
}

std::string SeccompRefusal(const HostFacts& f) {
  if (f.seccomp_error.empty()) return "";
  return fmt::format(
      "no run is launched without its syscall filter, and this host cannot build "
      "it: {}",
      f.seccomp_error);
}

}  // namespace codespace
