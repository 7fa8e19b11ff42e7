// RunStore: where run records live. An interface so that the embedded SQLite store and a fleet
// PostgreSQL store are interchangeable, and tests can inject failures.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/run_record.h"

namespace codespace {

struct RunListOptions {
  std::optional<RunState> state;  // only runs in this state
  size_t limit = 100;
  size_t offset = 0;  // newest first
};

class RunStore {
 public:
  virtual ~RunStore() = default;

  // Adds a new run. kAlreadyExists when the id is taken.
  [[nodiscard]] virtual Status Insert(const RunRecord& record) = 0;
  // kNotFound when there is no such run.
  [[nodiscard]] virtual Result<RunRecord> Get(std::string_view id) = 0;
  [[nodiscard]] virtual Result<std::vector<RunRecord>> List(const RunListOptions& options) = 0;
  // The run whose filtered namespace is `namespace_name`; kNotFound when no run of this store
  // has it (it may be another worker's).
  [[nodiscard]] virtual Result<RunRecord> FindByNamespace(std::string_view namespace_name) = 0;
  // Replaces the record of `updated.id` in one transaction, only when it is still in state
  // `expected` and IsAllowedTransition(expected, updated.state) (or the state is unchanged).
  // kAborted when another writer moved it first; kFailedPrecondition for a backward move.
  [[nodiscard]] virtual Status Update(const RunRecord& updated, RunState expected) = 0;
  // Removes the record of a run that has ended (retention: `codespace rm`, `prune`), in one
  // statement that checks its state: a run queued or running is never removed (kFailedPrecondition
  // naming its state); kNotFound when there is no such run.
  [[nodiscard]] virtual Status DeleteEnded(std::string_view id) = 0;
  // The run created with this idempotency key (there is at most one: Insert of a second is
  // kAlreadyExists); kNotFound when none.
  [[nodiscard]] virtual Result<RunRecord> FindByIdempotencyKey(std::string_view key) = 0;
  // The newest run with this name; kNotFound when none.
  [[nodiscard]] virtual Result<RunRecord> FindByName(std::string_view name) = 0;
};

}  // namespace codespace
