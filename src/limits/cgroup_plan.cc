#include "limits/cgroup_plan.h"

#include <fmt/format.h>
#include <signal.h>

#include <cstdlib>
#include <optional>
#include <string_view>

namespace codespace {

std::vector<std::string> CgroupControllers(CgroupHierarchy h) {
  switch (h) {
    case CgroupHierarchy::kV1:
      return {"memory", "pids", "cpu", "cpuacct"};
    case CgroupHierarchy::kV2:
      return {"memory", "pids", "cpu"};
    case CgroupHierarchy::kNone:
      return {};
  }
  return {};
}

namespace {
// CFS bandwidth: a quota per period. 100 ms is the kernel's default period.
constexpr uint64_t kCpuPeriodUsec = 100000;
}  // namespace

std::vector<CgroupWrite> PlanCgroupWrites(const RunLimits& l, CgroupHierarchy h) {
  std::vector<CgroupWrite> w;
  const uint64_t quota = l.cpu_millis * kCpuPeriodUsec / 1000;
  if (h == CgroupHierarchy::kV1) {
    if (l.memory_bytes) {
      const std::string m = std::to_string(l.memory_bytes);
      w.push_back({"memory", "memory.limit_in_bytes", m, true});
      // Memory and swap together capped at the same: the run never swaps beyond its limit.
      w.push_back({"memory", "memory.memsw.limit_in_bytes", m, false});
    }
    if (l.pids) w.push_back({"pids", "pids.max", std::to_string(l.pids), true});
    if (l.cpu_millis) {
      w.push_back({"cpu", "cpu.cfs_period_us", std::to_string(kCpuPeriodUsec), true});
      w.push_back({"cpu", "cpu.cfs_quota_us", std::to_string(quota), true});
    }
  } else if (h == CgroupHierarchy::kV2) {
    if (l.memory_bytes) {
      w.push_back({"", "memory.max", std::to_string(l.memory_bytes), true});
      w.push_back({"", "memory.swap.max", "0", false});
    }
    if (l.pids) w.push_back({"", "pids.max", std::to_string(l.pids), true});
    if (l.cpu_millis)
      w.push_back({"", "cpu.max", fmt::format("{} {}", quota, kCpuPeriodUsec), true});
  }
  return w;
}

std::vector<std::pair<std::string, std::string>> UsageFiles(CgroupHierarchy h) {
  switch (h) {
    case CgroupHierarchy::kV1:
      return {{"memory", "memory.max_usage_in_bytes"},
              {"memory", "memory.oom_control"},
              {"cpuacct", "cpuacct.stat"},
              {"pids", "pids.peak"}};
    case CgroupHierarchy::kV2:
      return {{"", "memory.peak"}, {"", "memory.events"}, {"", "cpu.stat"}, {"", "pids.peak"}};
    case CgroupHierarchy::kNone:
      return {};
  }
  return {};
}

namespace {

std::optional<uint64_t> Number(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// "key value" lines (memory.oom_control, memory.events, cpu.stat, cpuacct.stat).
std::optional<uint64_t> Keyed(std::string_view text, std::string_view key) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return Number(line.substr(key.size() + 1));
    }
    at = end + 1;
  }
  return std::nullopt;
}

const std::string* Find(const std::map<std::string, std::string>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? nullptr : &it->second;
}

}  // namespace

RunUsage ParseUsage(CgroupHierarchy h, const std::map<std::string, std::string>& t, long hz) {
  RunUsage u;
  if (h == CgroupHierarchy::kV1) {
    if (auto* s = Find(t, "memory/memory.max_usage_in_bytes")) u.peak_memory_bytes = Number(*s);
    if (auto* s = Find(t, "memory/memory.oom_control")) u.oom_kills = Keyed(*s, "oom_kill");
    if (auto* s = Find(t, "cpuacct/cpuacct.stat"); s && hz > 0) {
      auto ticks_to_usec = [hz](std::optional<uint64_t> ticks) -> std::optional<uint64_t> {
        if (!ticks) return std::nullopt;
        return *ticks * 1000000 / static_cast<uint64_t>(hz);
      };
      u.cpu_user_usec = ticks_to_usec(Keyed(*s, "user"));
      u.cpu_system_usec = ticks_to_usec(Keyed(*s, "system"));
    }
    if (auto* s = Find(t, "pids/pids.peak")) u.peak_pids = Number(*s);
  } else if (h == CgroupHierarchy::kV2) {
    if (auto* s = Find(t, "memory.peak")) u.peak_memory_bytes = Number(*s);
    if (auto* s = Find(t, "memory.events")) u.oom_kills = Keyed(*s, "oom_kill");
    if (auto* s = Find(t, "cpu.stat")) {
      u.cpu_user_usec = Keyed(*s, "user_usec");
      u.cpu_system_usec = Keyed(*s, "system_usec");
    }
    if (auto* s = Find(t, "pids.peak")) u.peak_pids = Number(*s);
  }
  return u;
}

RunOutcome ClassifyLimitKill(RunOutcome o, const RunLimits& limits, RunUsage* usage) {
  if (!limits.memory_bytes || !usage->oom_kills || *usage->oom_kills == 0) return o;
  if (o.kind != RunOutcome::Kind::kSignaled || o.signal != SIGKILL) return o;
  usage->limit_kill = "memory";
  o.reason = fmt::format("killed: memory limit {} reached", FormatBytes(limits.memory_bytes));
  return o;
}

}  // namespace codespace
