#include "cli/everyday.h"

#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "api/posture_value.h"
#include "api/worker_client.h"
#include "base/file_util.h"
#include "store/sqlite_run_store.h"
#include "supervisor/ended_record.h"
#include "supervisor/run_dir.h"

namespace codespace {

namespace {

Result<std::unique_ptr<SqliteRunStore>> OpenStateStore(const std::string& state_dir) {
  RETURN_IF_ERROR(MakeDirs(state_dir, 0700));
  return SqliteRunStore::Open(state_dir + "/codespace.db");
}

Result<RunRecord> GetRun(const std::string& state_dir, const std::string& id) {
  if (auto api = api::WorkerClient::IfServing(state_dir)) return api->Get(id);
  ASSIGN_OR_RETURN(auto store, OpenStateStore(state_dir));
  return store->Get(id);
}

}  // namespace

Result<std::string> ResolveRunId(const std::string& state_dir, const std::string& id) {
  if (IsValidRunId(id)) return id;
  if (id != "latest") {
    // A name (CheckRunName keeps names from looking like ids or "latest"): the newest run that
    // has it, from the store (the worker's API has no name lookup; the store is on this host).
    ASSIGN_OR_RETURN(auto store, OpenStateStore(state_dir));
    auto named = store->FindByName(id);
    if (named.ok()) return named->id;
    if (named.status().code() == StatusCode::kNotFound) {
      return NotFoundError(fmt::format("no run with id or name \"{}\"", id));
    }
    return named.status();
  }
  RunListOptions opts;
  opts.limit = 1;
  Result<std::vector<RunRecord>> runs = NotFoundError("no runs");
  if (auto api = api::WorkerClient::IfServing(state_dir)) {
    runs = api->List(opts);
  } else {
    ASSIGN_OR_RETURN(auto store, OpenStateStore(state_dir));
    runs = store->List(opts);
  }
  if (!runs.ok()) return runs.status();
  if (runs->empty())
    return NotFoundError(fmt::format("no runs in {}: nothing is \"latest\"", state_dir));
  return runs->front().id;
}

std::string NoWorkerNotice(const std::string& state_dir) {
  if (api::WorkerClient::IfServing(state_dir)) return "";
  return fmt::format(
      "no worker answers on {0}/api.sock: the run stays queued until `codespace worker` runs "
      "on this state dir (CODESPACE_STATE_DIR={0})",
      state_dir);
}

Result<RunRecord> WaitForEnd(const std::string& state_dir, const std::string& id,
                             const std::atomic<bool>& interrupted) {
  bool told = false;
  useconds_t pause = 20000;
  for (;;) {
    ASSIGN_OR_RETURN(RunRecord r, GetRun(state_dir, id));
    if (IsTerminal(r.state)) return r;
    if (r.state == RunState::kQueued && !told) {
      std::string notice = NoWorkerNotice(state_dir);
      if (!notice.empty()) fmt::print(stderr, "codespace: run {} is queued; {}\n", id, notice);
      told = true;
    }
    if (interrupted.load()) return Status(StatusCode::kUnavailable, "interrupted while waiting");
    ::usleep(pause);
    pause = std::min<useconds_t>(pause * 2, 200000);
  }
}

void LookAtRunsInFlight(RunStore& store, const std::string& state_dir) {
  if (api::WorkerClient::IfServing(state_dir)) return;
  RunListOptions running;
  running.state = RunState::kRunning;
  running.limit = 1000;
  auto runs = store.List(running);
  if (!runs.ok()) return;
  for (const auto& r : *runs) {
    RunDir dir = RunDirFor(state_dir, r.id);
    if (SupervisorLockHeld(dir)) continue;
    // Only a run that ended (its status.json written): one whose supervisor died without a word
    // is the worker's to record lost, since that means tearing its network down with the host's
    // tools, which a listing does not probe for.
    auto status = ReadRunStatus(dir);
    if (!status.ok()) continue;
    store.Update(EndedRecord(r, *status), RunState::kRunning).IgnoreError();
  }
}

std::string PostureJson(const HostFacts& facts) {
  return api::PostureValue(facts).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace codespace
