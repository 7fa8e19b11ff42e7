#include "worker/local_runner.h"

#include "base/clock.h"

namespace codespace {

Result<RunRecord> LocalProcessRunner::Create(const RunSpec& spec) { return Admitted(spec, false); }

Result<RunRecord> LocalProcessRunner::CreateRunning(const RunSpec& spec) {
  return Admitted(spec, true);
}

Result<RunRecord> LocalProcessRunner::Admitted(const RunSpec& spec, bool running) {
  RunRecord r;
  r.id = NewRunId();
  r.spec = spec;
  r.created_ms = NowMs();
  Admission a = Admit(facts_, spec, r.id);
  r.plan = a.decision.plan;
  r.network = PostureOfPlan(a.decision.plan);
  r.namespace_name = a.namespace_name;
  r.reason = a.reason;
  if (a.admitted && running) {
    r.state = RunState::kRunning;
    r.started_ms = r.created_ms;
  } else if (a.admitted) {
    r.state = RunState::kQueued;
  } else {
    r.state = RunState::kRefused;
    r.ended_ms = r.created_ms;
  }
  RETURN_IF_ERROR(store_->Insert(r));
  return r;
}

}  // namespace codespace
