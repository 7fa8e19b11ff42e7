#include "api/usage_metrics.h"

#include <fmt/format.h>

namespace codespace::api {

namespace {
// Peak memory: 16 MiB to 16 GiB by powers of 4. CPU seconds: 10 ms to an hour.
constexpr double kMemoryBounds[] = {16.0 * (1 << 20),   64.0 * (1 << 20),   256.0 * (1 << 20),
                                    1024.0 * (1 << 20), 4096.0 * (1 << 20), 16384.0 * (1 << 20)};
constexpr double kCpuBounds[] = {0.01, 0.1, 1, 10, 60, 600, 3600};
}  // namespace

void UsageMetrics::Add(Histogram& h, const double* bounds, size_t n, double value) {
  for (size_t i = 0; i < n; ++i) {
    if (value <= bounds[i]) h.buckets[bounds[i]]++;
  }
  h.sum += value;
  h.count++;
}

void UsageMetrics::Observe(const RunRecord& r) {
  const RunUsage& u = r.usage;
  if (u.peak_memory_bytes) {
    Add(memory_, kMemoryBounds, std::size(kMemoryBounds),
        static_cast<double>(*u.peak_memory_bytes));
  }
  if (u.cpu_user_usec || u.cpu_system_usec) {
    double seconds =
        static_cast<double>(u.cpu_user_usec.value_or(0) + u.cpu_system_usec.value_or(0)) / 1e6;
    Add(cpu_, kCpuBounds, std::size(kCpuBounds), seconds);
  }
  if (u.limit_kill == "memory") memory_kills_++;
}

void UsageMetrics::RenderHistogram(std::string& out, const char* name, const char* help,
                                   const Histogram& h, const double* bounds, size_t n) {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  for (size_t i = 0; i < n; ++i) {
    auto it = h.buckets.find(bounds[i]);
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds[i],
                       it == h.buckets.end() ? 0 : it->second);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, h.count, name,
                     h.sum, name, h.count);
}

void UsageMetrics::Render(std::string& out) const {
  RenderHistogram(out, "codespace_run_peak_memory_bytes",
                  "Peak memory of runs (their cgroup's memory.max_usage_in_bytes / memory.peak).",
                  memory_, kMemoryBounds, std::size(kMemoryBounds));
  RenderHistogram(out, "codespace_run_cpu_seconds",
                  "CPU seconds (user + system) runs used, from their cgroup.", cpu_, kCpuBounds,
                  std::size(kCpuBounds));
  out +=
      "# HELP codespace_run_limit_kills_total Runs ended by a limit, by limit.\n"
      "# TYPE codespace_run_limit_kills_total counter\n";
  out += fmt::format("codespace_run_limit_kills_total{{limit=\"memory\"}} {}\n", memory_kills_);
}

}  // namespace codespace::api
