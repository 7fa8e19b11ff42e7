// Remembered probes: the two expensive host probes (the trial sandbox, ~6 ms, and the throwaway
// network namespace) kept in the state directory, so that a one-shot `codespace run` or
// `submit` does not pay for them on every invocation. The worker and `codespace posture` always
// probe afresh (SPEC: "probed once at worker start").
//
// Why this cannot widen a run's network: the remembered facts only choose the plan; the launch
// still enforces it and fails closed. A stale "confines" makes bubblewrap fail and the run is
// aborted (and the memory forgotten); a stale "namespace" makes the filtered setup fail and the
// run is aborted; stale negatives only restrict. The cheap probes (tools, forwarding) are read
// afresh every time, and the memory is used only while everything the expensive probes depend
// on reads the same (ProbeCacheKey) and for at most a few minutes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "posture/host_facts.h"
#include "probe/host_probe.h"

namespace codespace {

// What the trial sandbox and the namespace probe found.
struct ExpensiveProbes {
  ConfinementProbe confinement;
  bool namespace_ok = false;
  std::string namespace_error;
};

// Everything the expensive probes' answers depend on, read cheaply from /proc and stat(2): the
// boot, this process's ids, capabilities, no_new_privs, seccomp and security label, its
// user/mount/net/pid namespaces, a hash of its mount table, the user-namespace sysctls, the
// bubblewrap binary that would run (path, inode, size, mtime, mode, owner), the options, and
// the trial sandbox's argv. Two reads that differ in anything mean "probe again".
std::string ProbeCacheKey(const ProbeOptions& options);

// The file's text; pure.
std::string EncodeProbeCache(std::string_view key, const ExpensiveProbes& probes,
                             int64_t probed_ms);
// The remembered probes when `text` is well formed, was written for exactly `key`, and is
// younger than `max_age_ms` at `now_ms` (and not from the future); nullopt otherwise. Pure.
std::optional<ExpensiveProbes> DecodeFreshProbeCache(std::string_view text, std::string_view key,
                                                     int64_t now_ms, int64_t max_age_ms);

// How long remembered probes are used: CODESPACE_PROBE_CACHE_SECONDS (default 600; 0 turns
// remembering off).
int64_t ProbeCacheMaxAgeMs();

// HostFacts for one command: the expensive probes from `cache_path` when fresh for this host,
// else probed now and remembered there (best effort: a state directory that does not exist yet
// or is not writable only costs the next command a probe). Tools and forwarding always probed
// now. `*remembered` says which it was.
HostFacts ProbeHostRemembering(const ProbeOptions& options, const std::string& cache_path,
                               bool* remembered);

// Forgets what `cache_path` remembers (a run planned from it did not start).
void ForgetProbes(const std::string& cache_path);

}  // namespace codespace
