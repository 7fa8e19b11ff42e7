#include "worker/retention.h"

#include <fmt/format.h>

#include <charconv>
#include <climits>

#include "base/file_util.h"
#include "supervisor/run_dir.h"

namespace codespace {

Result<std::chrono::seconds> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError(fmt::format(
        "duration \"{}\": expected a whole number and a unit, s, m, h, d or w (e.g. 30d)", text));
  };
  if (text.size() < 2) return bad();
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size() - 1, n);
  if (ec != std::errc() || end != text.data() + text.size() - 1 || n < 0) return bad();
  int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    case 'w':
      unit = 7 * 86400;
      break;
    default:
      return bad();
  }
  if (n > INT64_MAX / unit / 1000) return bad();  // milliseconds of it must fit
  return std::chrono::seconds(n * unit);
}

Result<std::optional<std::chrono::seconds>> PruneAfterFromEnvironment() {
  std::string v = GetEnv("CODESPACE_PRUNE_AFTER");
  if (v.empty()) return std::optional<std::chrono::seconds>();
  auto d = ParseDuration(v);
  if (!d.ok()) return d.status().WithContext("CODESPACE_PRUNE_AFTER");
  return std::optional<std::chrono::seconds>(*d);
}

bool ShouldPrune(const RunRecord& r, int64_t now_ms, std::chrono::seconds age) {
  if (!IsTerminal(r.state)) return false;
  int64_t at = r.ended_ms ? r.ended_ms : r.created_ms;
  auto age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(age).count();
  return at <= now_ms - age_ms;
}

Status RemoveRun(RunStore& store, const std::string& state_dir, const std::string& id) {
  RunDir dir = RunDirFor(state_dir, id);
  if (SupervisorLockHeld(dir)) {
    return FailedPreconditionError(fmt::format(
        "run {}: its supervisor is still at work (a run in flight is never removed)", id));
  }
  RETURN_IF_ERROR(store.DeleteEnded(id));
  // The record goes first: a crash here leaves a directory no record names, which a later rm
  // or prune of nothing cannot reach — but never a record whose logs are gone.
  return RemoveTree(dir.path);
}

PruneResult PruneRuns(RunStore& store, const std::string& state_dir, std::chrono::seconds age,
                      int64_t now_ms) {
  PruneResult out;
  constexpr size_t kPage = 500;
  for (RunState st : {RunState::kExited, RunState::kAborted, RunState::kRefused,
                      RunState::kCancelled, RunState::kLost}) {
    RunListOptions o;
    o.state = st;
    o.limit = kPage;
    for (;;) {
      auto page = store.List(o);
      if (!page.ok()) {
        out.errors.push_back(page.status().message());
        break;
      }
      size_t kept = 0;
      for (const auto& r : *page) {
        if (!ShouldPrune(r, now_ms, age)) {
          ++kept;
          continue;
        }
        Status s = RemoveRun(store, state_dir, r.id);
        if (s.ok())
          out.removed.push_back(r.id);
        else {
          ++kept;
          out.errors.push_back(s.message());
        }
      }
      if (page->size() < kPage) break;
      o.offset += kept;  // removed rows no longer take a place in the listing
    }
  }
  return out;
}

}  // namespace codespace
