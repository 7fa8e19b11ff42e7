#include "limits/limits_policy.h"

#include <fmt/format.h>

#include <cstdlib>

#include "base/file_util.h"
#include "base/quote.h"

namespace codespace {

std::string_view CgroupHierarchyName(CgroupHierarchy h) {
  switch (h) {
    case CgroupHierarchy::kV1:
      return "v1";
    case CgroupHierarchy::kV2:
      return "v2";
    case CgroupHierarchy::kNone:
      return "none";
  }
  return "none";
}

namespace {

// One kind of limit: its CLI flag, its environment suffix, where it lives, how it reads.
struct LimitKind {
  const char* flag;
  const char* env;
  uint64_t RunLimits::*field;
  Result<uint64_t> (*parse)(std::string_view);
  std::string (*format)(uint64_t);
};

std::string FormatNumber(uint64_t n) { return std::to_string(n); }
std::string FormatCores(uint64_t m) { return FormatCpus(m) + " cores"; }

constexpr LimitKind kKinds[] = {
    {"--memory", "MEMORY", &RunLimits::memory_bytes, ParseByteSize, FormatBytes},
    {"--pids", "PIDS", &RunLimits::pids, ParseCount, FormatNumber},
    {"--cpus", "CPUS", &RunLimits::cpu_millis, ParseCpus, FormatCores},
    {"--tmp-size", "TMP_SIZE", &RunLimits::tmp_bytes, ParseByteSize, FormatBytes},
    {"--nofile", "NOFILE", &RunLimits::nofile, ParseCount, FormatNumber},
};

}  // namespace

Result<LimitSettings> ParseLimitSettings(const std::function<std::string(const char*)>& getenv) {
  LimitSettings s;
  for (const LimitKind& k : kKinds) {
    for (bool is_max : {false, true}) {
      std::string name = fmt::format("CODESPACE_{}_{}", is_max ? "MAX" : "DEFAULT", k.env);
      std::string value = getenv(name.c_str());
      if (value.empty()) continue;
      auto parsed = k.parse(value);
      if (!parsed.ok()) return parsed.status().WithContext(name);
      // Through a named reference: GCC 12 assigned into a temporary copy when `.*` was applied
      // to the conditional expression directly.
      RunLimits& into = is_max ? s.maxima : s.defaults;
      into.*k.field = *parsed;
    }
    uint64_t d = s.defaults.*k.field, m = s.maxima.*k.field;
    if (d && m && d > m) {
      return InvalidArgumentError(
          fmt::format("CODESPACE_DEFAULT_{} ({}) is above CODESPACE_MAX_{} ({})", k.env,
                      k.format(d), k.env, k.format(m)));
    }
  }
  std::string require = getenv("CODESPACE_REQUIRE_LIMITS");
  if (!require.empty() && require != "0" && require != "1") {
    return InvalidArgumentError(
        fmt::format("CODESPACE_REQUIRE_LIMITS: \"{}\" is neither 0 nor 1", require));
  }
  s.require = require == "1";
  std::string root = getenv("CODESPACE_CGROUP_ROOT");
  if (!root.empty()) {
    if (root[0] != '/') {
      return InvalidArgumentError(
          fmt::format("CODESPACE_CGROUP_ROOT: \"{}\" is not an absolute path", root));
    }
    s.cgroup_root = root;
  }
  return s;
}

Result<LimitSettings> LimitSettingsFromEnvironment() {
  return ParseLimitSettings([](const char* name) { return GetEnv(name); });
}

std::string LimitsPosture(const LimitsFacts& f) {
  std::string out = fmt::format("limits={}", CgroupHierarchyName(f.hierarchy));
  if (f.hierarchy == CgroupHierarchy::kNone) {
    out += fmt::format(" limitsUnavailable={}", QuoteForLine(f.unavailable_reason));
  }
  if (!f.settings_error.empty())
    out += fmt::format(" limitsConfigError={}", QuoteForLine(f.settings_error));
  if (f.settings.require) out += " requireLimits=yes";
  return out;
}

LimitsDecision DecideLimits(const LimitsFacts& f, bool confined, const RunLimits& asked) {
  LimitsDecision d;
  auto refuse = [&](std::string why) {
    d.admitted = false;
    d.reason = std::move(why);
    return d;
  };
  if (!f.settings_error.empty()) {
    return refuse("the worker's limit settings do not parse: " + f.settings_error);
  }
  d.limits = asked;
  for (const LimitKind& k : kKinds) {
    uint64_t& v = d.limits.*k.field;
    if (!v) v = f.settings.defaults.*k.field;
    uint64_t max = f.settings.maxima.*k.field;
    // A request above a maximum is refused, not lowered: the caller asked for that much.
    if (max && v > max) {
      return refuse(fmt::format("{} {} is above this worker's maximum of {} (CODESPACE_MAX_{})",
                                k.flag, k.format(v), k.format(max), k.env));
    }
  }
  if (f.settings.require && !d.limits.needs_cgroup()) {
    return refuse(
        "CODESPACE_REQUIRE_LIMITS=1: the run sets no memory, process or CPU limit and the worker "
        "has no default (set --memory, --pids or --cpus, or CODESPACE_DEFAULT_MEMORY)");
  }
  if (d.limits.needs_cgroup() && f.hierarchy == CgroupHierarchy::kNone) {
    return refuse(fmt::format(
        "the run asks for limits this host cannot enforce ({}): limits=none: {}; it is not run "
        "without them",
        DescribeLimits(RunLimits{d.limits.memory_bytes, d.limits.pids, d.limits.cpu_millis, 0, 0}),
        f.unavailable_reason));
  }
  if (d.limits.tmp_bytes && !confined) {
    return refuse(fmt::format(
        "--tmp-size {}: an unconfined run has no private /tmp whose size could be limited (it "
        "writes the host's /tmp); it is not run without the limit",
        FormatBytes(d.limits.tmp_bytes)));
  }
  d.admitted = true;
  return d;
}

}  // namespace codespace
