#include "worker/local_runner.h"

#include <fmt/format.h>

#include "base/clock.h"
#include "policy/public_suffix.h"
#include "run/run_labels.h"
#include "seccomp/syscall_policy.h"

namespace codespace {

Status LocalProcessRunner::CheckWildcards(const RunSpec& spec) const {
  for (const AllowlistEntry& e : spec.egress.allowlist) {
    RETURN_IF_ERROR(CheckWildcardNotPublicSuffix(
        e, public_suffixes_ ? *public_suffixes_ : SystemPublicSuffixList()));
  }
  return OkStatus();
}

Result<RunRecord> LocalProcessRunner::Create(const RunSpec& spec, const CreateOptions& options,
                                             bool* replayed) {
  return Admitted(spec, false, options, replayed);
}

Result<RunRecord> LocalProcessRunner::CreateRunning(const RunSpec& spec,
                                                    const CreateOptions& options) {
  return Admitted(spec, true, options, nullptr);
}

Result<RunRecord> LocalProcessRunner::Replay(const RunSpec& spec, const RunRecord& first,
                                             bool* replayed) const {
  if (first.spec != spec) {
    return FailedPreconditionError(fmt::format(
        "idempotency key \"{}\" was first used for run {} with a different spec; a key names "
        "one submission (use a new key for a new run)",
        first.idempotency_key, first.id));
  }
  if (replayed) *replayed = true;
  return first;
}

Result<RunRecord> LocalProcessRunner::Admitted(const RunSpec& spec, bool running,
                                               const CreateOptions& options, bool* replayed) {
  if (replayed) *replayed = false;
  if (!options.name.empty()) RETURN_IF_ERROR(CheckRunName(options.name));
  // Refused before anything is recorded, on every way a run is created (CLI and API alike).
  RETURN_IF_ERROR(CheckWildcards(spec));
  if (!options.idempotency_key.empty()) {
    RETURN_IF_ERROR(CheckIdempotencyKey(options.idempotency_key));
    // Submitted before (its answer lost, say): the answer is the first run.
    auto first = store_->FindByIdempotencyKey(options.idempotency_key);
    if (first.ok()) return Replay(spec, *first, replayed);
    if (first.status().code() != StatusCode::kNotFound) return first.status();
  }
  RunRecord r;
  r.id = NewRunId();
  r.spec = spec;
  r.name = options.name;
  r.idempotency_key = options.idempotency_key;
  r.created_ms = NowMs();
  Admission a = Admit(facts_, spec, r.id);
  r.plan = a.decision.plan;
  r.network = PostureOfPlan(a.decision.plan);
  r.namespace_name = a.namespace_name;
  r.reason = a.reason;
  if (a.admitted) r.spec.limits = a.limits;  // the defaults filled in: what it runs with
  // The filter its launch installs (a pure function of the spec): named now, so that the record
  // says it while the run is running, and the supervisor refuses to launch under another.
  if (a.admitted) r.seccomp = SeccompFilterName({.allow_ptrace = spec.allow_ptrace});
  if (a.admitted && running) {
    r.state = RunState::kRunning;
    r.started_ms = r.created_ms;
  } else if (a.admitted) {
    r.state = RunState::kQueued;
  } else {
    r.state = RunState::kRefused;
    r.ended_ms = r.created_ms;
  }
  Status inserted = store_->Insert(r);
  if (!inserted.ok() && !r.idempotency_key.empty() &&
      inserted.code() == StatusCode::kAlreadyExists) {
    // The same key at the same moment from another process: the UNIQUE index let one in.
    auto first = store_->FindByIdempotencyKey(r.idempotency_key);
    if (first.ok()) return Replay(spec, *first, replayed);
  }
  RETURN_IF_ERROR(inserted);
  return r;
}

}  // namespace codespace
