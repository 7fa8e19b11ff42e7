#include "store/run_record.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "base/clock.h"

namespace codespace {
namespace {

constexpr std::array<std::pair<RunState, std::string_view>, 7> kRunStateNames = {{
    {RunState::kQueued, "queued"},
    {RunState::kRunning, "running"},
    {RunState::kExited, "exited"},
    {RunState::kAborted, "aborted"},
    {RunState::kRefused, "refused"},
    {RunState::kCancelled, "cancelled"},
    {RunState::kLost, "lost"},
}};

}  // namespace

std::string_view RunStateName(RunState state) {
  for (const auto& [value, name] : kRunStateNames) {
    if (value == state) return name;
  }
  return "unknown";
}

Result<RunState> ParseRunState(std::string_view text) {
  for (const auto& [value, name] : kRunStateNames) {
    if (name == text) return value;
  }
  return InvalidArgumentError(fmt::format(
      "unknown run state \"{}\" (expected queued, running, exited, aborted, refused, cancelled "
      "or lost)",
      text));
}

bool IsTerminal(RunState state) {
  switch (state) {
    case RunState::kQueued:
    case RunState::kRunning:
      return false;
    case RunState::kExited:
    case RunState::kAborted:
    case RunState::kRefused:
    case RunState::kCancelled:
    case RunState::kLost:
      return true;
  }
  return true;  // not reached; an unknown value is treated as final so nothing moves it
}

bool IsAllowedTransition(RunState from, RunState to) {
  switch (from) {
    case RunState::kQueued:
      return to == RunState::kRunning || to == RunState::kAborted || to == RunState::kRefused ||
             to == RunState::kCancelled;
    case RunState::kRunning:
      return to == RunState::kExited || to == RunState::kAborted || to == RunState::kCancelled ||
             to == RunState::kLost;
    case RunState::kExited:
    case RunState::kAborted:
    case RunState::kRefused:
    case RunState::kCancelled:
    case RunState::kLost:
      return false;
  }
  return false;
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
      if (!o.reason.empty()) r->reason = o.reason;  // e.g. killed by its memory limit
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
      // Signal 0: the command exited by itself within the stop grace, with its own status.
      if (o.signal)
        r->signal = o.signal;
      else
        r->exit_code = o.exit_code;
      r->reason = o.reason;
      break;
    case RunOutcome::Kind::kAborted:
      r->state = RunState::kAborted;
      r->reason = o.reason;
      break;
  }
}

int RecordShellCode(const RunRecord& r) {
  if (r.state == RunState::kAborted || r.state == RunState::kRefused ||
      r.state == RunState::kLost) {
    return kExitCodespaceFailed;
  }
  if (r.signal) return 128 + *r.signal;
  return r.exit_code.value_or(kExitCodespaceFailed);
}

}  // namespace codespace
