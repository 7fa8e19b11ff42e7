// RunLimits: the resources one run may use (SPEC "Limits"), and RunUsage: what it used. Values;
// the parsers of the CLI's sizes ("2G", "512M") and core counts ("1.5") are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace codespace {

// Every field 0 means "no limit of this kind". memory, pids and cpu are enforced by the run's
// cgroup (limits/), tmp by the size of the sandbox's /tmp and /var/tmp tmpfs (each), nofile by
// RLIMIT_NOFILE set before exec.
struct RunLimits {
  uint64_t memory_bytes = 0;  // memory + swap together: the run never swaps beyond it
  uint64_t pids = 0;          // processes (and threads) alive at once
  uint64_t cpu_millis = 0;    // CPU bandwidth in thousandths of a core: 1500 = 1.5 cores
  uint64_t tmp_bytes = 0;     // size of /tmp, and separately of /var/tmp
  uint64_t nofile = 0;        // open descriptors per process

  // Whether a cgroup must enforce some of these.
  bool needs_cgroup() const { return memory_bytes || pids || cpu_millis; }
  bool empty() const { return !needs_cgroup() && !tmp_bytes && !nofile; }
  friend bool operator==(const RunLimits&, const RunLimits&) = default;
};

// "2G", "512M", "64k", "1.5G", "1048576" (bytes). Suffixes K/M/G/T are powers of 1024, upper or
// lower case, with an optional "i" and "B" ("2GiB", "512MB" are 2 GiB and 512 MiB). Not 0, not
// negative, not above 2^62.
Result<uint64_t> ParseByteSize(std::string_view text);
// "1.5", "2", "0.25" cores → millicores (at most three decimals; at least 0.01 core).
Result<uint64_t> ParseCpus(std::string_view text);
// A positive count ("512").
Result<uint64_t> ParseCount(std::string_view text);

// "512 MiB", "1.5 GiB", "4096 bytes": for records and reasons.
std::string FormatBytes(uint64_t bytes);
// "1.5", "0.25", "2".
std::string FormatCpus(uint64_t millis);
// "memory=512 MiB pids=64 cpus=1.5 tmp=64 MiB nofile=1024", or "none".
std::string DescribeLimits(const RunLimits& limits);

// What a run used, read from its cgroup after the run and before the cgroup is removed. Unset
// fields: not measured (no cgroup, or the kernel lacks the file).
struct RunUsage {
  std::optional<uint64_t> peak_memory_bytes;
  std::optional<uint64_t> cpu_user_usec;
  std::optional<uint64_t> cpu_system_usec;
  std::optional<uint64_t> peak_pids;
  std::optional<uint64_t> oom_kills;  // processes the OOM killer killed inside the run's limit
  // The limit that ended the run, when one did: "memory". Empty otherwise.
  std::string limit_kill;

  bool empty() const {
    return !peak_memory_bytes && !cpu_user_usec && !cpu_system_usec && !peak_pids && !oom_kills &&
           limit_kill.empty();
  }
  friend bool operator==(const RunUsage&, const RunUsage&) = default;
};

}  // namespace codespace
