// The limits part of admission: what the host can enforce (LimitsFacts, probed once like every
// host fact), the worker's defaults and maxima (LimitSettings), and the pure decision that turns
// a run's asked limits into the limits it runs with, or a refusal with the reason. Fail closed:
// a limit the host cannot enforce refuses the run; it never runs unlimited.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "run/run_limits.h"

namespace codespace {

enum class CgroupHierarchy { kNone, kV1, kV2 };
std::string_view CgroupHierarchyName(CgroupHierarchy h);  // "none", "v1", "v2"

// The worker's configuration of limits. Environment (read by LimitSettingsFromEnvironment):
//   CODESPACE_DEFAULT_{MEMORY,PIDS,CPUS,TMP_SIZE,NOFILE}  what a run that sets none gets
//   CODESPACE_MAX_{MEMORY,PIDS,CPUS,TMP_SIZE,NOFILE}      a run asking more is refused
//   CODESPACE_REQUIRE_LIMITS=1  every run must run under a cgroup limit (memory, pids or cpus,
//                               its own or the defaults); a host that cannot enforce one refuses
//                               every run
//   CODESPACE_CGROUP_ROOT       where the cgroup hierarchies are mounted (/sys/fs/cgroup)
struct LimitSettings {
  RunLimits defaults;
  RunLimits maxima;  // 0: no maximum of that kind
  bool require = false;
  std::string cgroup_root = "/sys/fs/cgroup";
  friend bool operator==(const LimitSettings&, const LimitSettings&) = default;
};

// The settings from `getenv` (a seam: tests pass a map). An unparsable value is an error naming
// the variable: the caller must not run anything on a guess.
Result<LimitSettings> ParseLimitSettings(const std::function<std::string(const char*)>& getenv);
// The same from this process's environment; errors are kept in LimitsFacts::settings_error.
Result<LimitSettings> LimitSettingsFromEnvironment();

// What the host can enforce, for the posture line (`limits=v1`, `limits=none reason=...`).
struct LimitsFacts {
  CgroupHierarchy hierarchy = CgroupHierarchy::kNone;
  std::string unavailable_reason;  // why kNone, in words an operator can act on
  LimitSettings settings;
  std::string settings_error;  // a worker setting did not parse: every run is refused with it
  friend bool operator==(const LimitsFacts&, const LimitsFacts&) = default;
};

// The posture line's part: `limits=v1`, or `limits=none limitsUnavailable="..."`, plus
// `requireLimits=yes` when set.
std::string LimitsPosture(const LimitsFacts& facts);

struct LimitsDecision {
  bool admitted = false;
  RunLimits limits;    // what the run gets: asked, else the defaults
  std::string reason;  // why refused
};

// `asked` with the defaults filled in, checked against the maxima and the host. `confined`:
// whether the run gets a bubblewrap sandbox (only there is /tmp private, so only there can its
// size be limited).
LimitsDecision DecideLimits(const LimitsFacts& facts, bool confined, const RunLimits& asked);

}  // namespace codespace
