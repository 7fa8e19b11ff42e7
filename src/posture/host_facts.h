// HostFacts: what the worker learned about its host at start, and the verdicts derived from it.
//
// The probes that fill it live in probe/ (they touch the host); everything here is pure, so the
// truth tables are tested exhaustively. Probed once per worker start; admission and launch read
// the same value (HostFiltersAllowlist), never their own.
#pragma once

#include <string>
#include <string_view>

#include "limits/limits_policy.h"

namespace codespace {

// The three parts of CanFilter, each with the words an operator can act on when it fails.
struct FilterParts {
  bool tools = false;       // IsSupported: ip and nft (the filtered-egress machinery) are present
  std::string tools_error;  // why not, when !tools
  bool namespace_ok = false;   // one throwaway network namespace was created (and removed)
  std::string namespace_error;
  bool forwarding = false;  // ip_forward reads 1, or passes access(W_OK)
  std::string forwarding_error;
};

// CanFilter = tools ∧ namespace ∧ forwarding, and FilterUnavailableReason: the first failing
// part, in words (empty when CanFilter).
struct FilterVerdict {
  bool can_filter = false;
  std::string unavailable_reason;
};
FilterVerdict DecideFilter(const FilterParts& parts);

struct HostFacts {
  unsigned uid = 0;
  bool confines = false;      // bubblewrap found and a trial sandbox (own user+net ns) exited 0
  std::string bwrap_path;     // where bubblewrap was found, or empty
  std::string confine_error;  // why not, when !confines
  FilterParts filter;
  FilterVerdict verdict;      // DecideFilter(filter)
  bool require_confinement = false;  // CODESPACE_REQUIRE_CONFINEMENT=1
  // What a run is on the host (identity/): "per-run" on a root worker (each run a uid and gid
  // of its own, leased from run_uids), "worker-uid" otherwise (the runs keep the worker's).
  std::string identity = "worker-uid";
  std::string run_uids;        // per-run: the range, "FIRST-LAST"
  std::string identity_error;  // per-run: why the range cannot be used; the worker refuses
  LimitsFacts limits;  // limits=v2|v1|none: the cgroup hierarchy runs are limited by, and settings
  // Why this host cannot build or load the run's syscall filter (seccomp/seccomp_filter.h);
  // empty when it can. Non-empty refuses every run: none is launched unfiltered.
  std::string seccomp_error;

  bool tools() const { return filter.tools; }
  bool can_filter() const { return verdict.can_filter; }
};

// The one host fact that admission and launch both read to decide an allowlist run:
// where bubblewrap confines, CanFilter; where it does not, tools alone (the setup then filters
// the run or aborts it, and it never reaches the worker's network).
bool HostFiltersAllowlist(const HostFacts& facts);

// What happens to an allowlist run on this host, for the posture line:
// "filtered", "severed" (confining host that cannot filter), "filtered-or-aborted"
// (unconfined host with the tools), "refused" (unconfined, no tools).
std::string_view AllowlistOutcomeWord(const HostFacts& facts);

// The posture line, one line at start, e.g.
// posture uid=1654 confines=yes bwrap=/usr/bin/bwrap tools=yes canFilter=no
//   filterUnavailable="cannot create a network namespace: Operation not permitted"
//   allowlist=severed
std::string PostureLine(const HostFacts& facts);

// A worker that must confine but does not, or a root worker whose run uids overlap an account
// (identity_error): the reason it refuses to start; empty otherwise.
std::string ConfinementRefusal(const HostFacts& facts);

// A host whose syscall filter cannot be built: why every run is refused; empty otherwise.
std::string SeccompRefusal(const HostFacts& facts);

}  // namespace codespace
