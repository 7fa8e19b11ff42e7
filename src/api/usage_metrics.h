// /metrics for runs' resource usage (issue 15): histograms of peak memory and CPU seconds over
// runs with a measured usage, and a counter of runs ended by a limit (by kind).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "store/run_record.h"

namespace codespace::api {

class UsageMetrics {
 public:
  void Observe(const RunRecord& record);
  // Prometheus text, HELP and TYPE lines included; every series always present (zeros too).
  void Render(std::string& out) const;

 private:
  struct Histogram {
    std::map<double, uint64_t> buckets;  // upper bound → count of observations at or below
    double sum = 0;
    uint64_t count = 0;
  };
  static void Add(Histogram& h, const double* bounds, size_t n, double value);
  static void RenderHistogram(std::string& out, const char* name, const char* help,
                              const Histogram& h, const double* bounds, size_t n);
  Histogram memory_, cpu_;
  uint64_t memory_kills_ = 0;
};

}  // namespace codespace::api
