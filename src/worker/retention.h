// Retention: removing the records and logs of runs that have ended (`codespace rm`, `codespace
// prune --older-than`, and the worker's own pruning by CODESPACE_PRUNE_AFTER). A run in flight
// (queued or running, or one whose supervisor still holds its directory) is never removed: the
// store checks the state in the DELETE itself, and the supervisor lock is looked at first.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/run_record.h"
#include "store/run_store.h"

namespace codespace {

// "30d", "12h", "90m", "45s", "2w" (a whole number and one unit) → the duration.
Result<std::chrono::seconds> ParseDuration(std::string_view text);

// The worker's retention age: CODESPACE_PRUNE_AFTER (a ParseDuration text); nullopt when unset
// (records are kept until removed by hand). An unreadable value is an error naming the variable.
Result<std::optional<std::chrono::seconds>> PruneAfterFromEnvironment();

// Whether `r` is old enough to prune at `now_ms` with retention `age`: it has ended, and it ended
// (or, never started, was created) before now - age. Pure.
bool ShouldPrune(const RunRecord& r, int64_t now_ms, std::chrono::seconds age);

// Removes run `id`'s record, then its directory (logs, status). kFailedPrecondition for a run in
// flight, or whose supervisor is still finishing (a filtered run's network teardown).
Status RemoveRun(RunStore& store, const std::string& state_dir, const std::string& id);

struct PruneResult {
  std::vector<std::string> removed;
  std::vector<std::string> errors;  // one line per run that could not be removed
};
// Removes every run ShouldPrune says, at `now_ms`.
PruneResult PruneRuns(RunStore& store, const std::string& state_dir, std::chrono::seconds age,
                      int64_t now_ms);

}  // namespace codespace
