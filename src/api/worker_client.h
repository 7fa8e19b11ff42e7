// WorkerClient: the CLI's typed view of a running worker's API (`codespace submit`, `runs`,
// `show`, `logs`, `cancel`, `plan`, `posture` use it when the worker's socket answers, and fall
// back to the store otherwise). Errors carry the API's own message ({"error"} of a 4xx/5xx).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "plan/admission.h"
#include "run/run_spec.h"
#include "store/run_record.h"
#include "store/run_store.h"

namespace codespace::api {

class WorkerClient {
 public:
  // A client when <state_dir>/api.sock accepts a connection now; nullopt otherwise.
  static std::optional<WorkerClient> IfServing(const std::string& state_dir);
  explicit WorkerClient(std::string address) : address_(std::move(address)) {}

  struct Posture {
    std::string line;
    std::string refusal;
  };
  Result<Posture> GetPosture();
  struct Planned {
    Admission admission;
    std::string run_id;  // the id the predicted namespace is for
  };
  Result<Planned> Plan(const RunSpec& spec);
  // The created record: queued, or refused (then with its reason). `idempotency_key` (may be
  // empty) goes in the Idempotency-Key header: a retry with the same key answers with the
  // first run. `name` (may be empty) is the run's name.
  Result<RunRecord> Submit(const RunSpec& spec, const std::string& idempotency_key = "",
                           const std::string& name = "");
  Result<std::vector<RunRecord>> List(const RunListOptions& options);
  Result<RunRecord> Get(const std::string& id);
  Status Cancel(const std::string& id);
  // Copies the run's stdout and stderr to the two descriptors, following until it ends when
  // `follow`.
  Status Logs(const std::string& id, bool follow, int out_fd, int err_fd);

 private:
  std::string address_;
};

}  // namespace codespace::api
