// The host probes: what this worker can do, learned once at start. They read the host and never
// change it: the trial sandbox and the throwaway namespace are gone when the probe returns, and
// forwarding is read (or checked with access(W_OK)), never written.
#pragma once

#include <string>

#include "posture/host_facts.h"

namespace codespace {

struct ProbeOptions {
  std::string bwrap_override;  // CODESPACE_BWRAP_PATH: when set, the only bubblewrap considered
  std::string path_env;        // PATH, searched for bwrap, ip and nft
  std::string forwarding_path = "/proc/sys/net/ipv4/ip_forward";
  bool require_confinement = false;  // CODESPACE_REQUIRE_CONFINEMENT=1
  // Limits: defaults, maxima, CODESPACE_REQUIRE_LIMITS, the cgroup root (limits_policy.h);
  // `limit_settings_error` when they did not parse.
  LimitSettings limit_settings;
  std::string limit_settings_error;
};

// The options as this process's environment sets them.
ProbeOptions ProbeOptionsFromEnvironment();

// confines: bubblewrap is found and TrialSandboxArgv() exits 0.
struct ConfinementProbe {
  bool confines = false;
  std::string bwrap_path;
  std::string error;
};
ConfinementProbe ProbeConfinement(const ProbeOptions& options);

// tools (IsSupported): `ip` and `nft` are found on PATH.
bool ProbeTools(const std::string& path_env, std::string* error);

// namespace: one throwaway network namespace can be created. A child process unshares
// CLONE_NEWNET and exits; the namespace dies with it, so nothing is left to remove.
bool ProbeNamespace(std::string* error);

// forwarding: `path` reads 1, or passes access(W_OK) (the filtered setup may then write it).
// Never writes: a probe must not change the host, and sysctl's exit status is not evidence.
bool ProbeForwarding(const std::string& path, std::string* error);

// FilterProbe(forwarding_path): the three parts of CanFilter, with the forwarding file passed in
// so that tests pin the whole probe on real files.
FilterParts FilterProbe(const std::string& path_env, const std::string& forwarding_path);

// limits: the cgroup hierarchy under the configured root that this process can make run cgroups
// in (limits/run_cgroup.h DetectCgroupLayout), and the settings. Creates nothing.
LimitsFacts ProbeLimits(const ProbeOptions& options);

// All of it: HostFacts with the verdict computed.
HostFacts ProbeHost(const ProbeOptions& options);

// Fills the identity facts: per-run on a root worker, with the configured run uids checked
// against the host's accounts (identity_error when they overlap one, or do not parse).
void ProbeIdentity(HostFacts* facts);

}  // namespace codespace
