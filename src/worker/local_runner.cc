#include "worker/local_runner.h"

#include <chrono>

#include "base/file_util.h"
#include "seccomp/syscall_policy.h"

namespace codespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<RunnerConfig> RunnerConfigFromEnvironment(RunnerConfig base) {
  std::string v4 = GetEnv("CODESPACE_POOL_V4", base.pool.v4_cidr());
  std::string v6 = GetEnv("CODESPACE_POOL_V6", base.pool.v6_cidr());
  ASSIGN_OR_RETURN(base.pool, AddressPool::Parse(v4, v6));
  base.upstream_dns = GetEnv("CODESPACE_DNS_UPSTREAM", base.upstream_dns);
  return base;
}

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
  RETURN_IF_ERROR(store_->Insert(r));
  return r;
}

void ApplyOutcome(const RunOutcome& o, RunRecord* r) {
  r->ended_ms = NowMs();
  switch (o.kind) {
    case RunOutcome::Kind::kExited:
      r->state = RunState::kExited;
      r->exit_code = o.exit_code;
      break;
    case RunOutcome::Kind::kSignaled:
      r->state = RunState::kExited;
      r->signal = o.signal;
      break;
    case RunOutcome::Kind::kNotFound:
    case RunOutcome::Kind::kCannotInvoke:
      r->state = RunState::kExited;
      r->exit_code = o.ShellCode();
      r->reason = o.reason;
      break;
    case RunOutcome::Kind::kCancelled:
    case RunOutcome::Kind::kTimedOut:
      r->state = RunState::kCancelled;
      r->signal = o.signal;
      r->reason = o.reason;
      break;
    case RunOutcome::Kind::kAborted:
      r->state = RunState::kAborted;
      r->reason = o.reason;
      break;
  }
}

}  // namespace codespace
