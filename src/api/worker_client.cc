#include "api/worker_client.h"

#include "api/api_server.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api/api_client.h"
#include "base/unique_fd.h"
#include "store/record_json.h"

namespace codespace::api {
namespace {

using Json = nlohmann::json;

Result<Json> ParseBody(const ClientResponse& r) {
  Json j = Json::parse(r.body, nullptr, false);
  if (j.is_discarded()) return InternalError(fmt::format("worker API: not JSON: {}", r.body));
  return j;
}

Status ErrorOf(const ClientResponse& r) {
  Json j = Json::parse(r.body, nullptr, false);
  std::string msg =
      !j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string()
          ? j["error"].get<std::string>()
          : r.body;
  switch (r.status) {
    case 404:
      return NotFoundError(msg);
    case 400:
    case 413:
    case 415:
    case 422:
      return InvalidArgumentError(msg);
    case 409:
      return FailedPreconditionError(msg);
    default:
      return InternalError(fmt::format("worker API {}: {}", r.status, msg));
  }
}

Result<RunRecord> RecordOf(const Json& j) {
  return RunRecordFromJson(j.dump(-1, ' ', false, Json::error_handler_t::replace));
}

std::string Str(const Json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

}  // namespace

std::optional<WorkerClient> WorkerClient::IfServing(const std::string& state_dir) {
  std::string address = "unix:" + ApiSocketPath(state_dir);
  if (!ConnectTo(address).ok()) return std::nullopt;
  return WorkerClient(address);
}

Result<WorkerClient::Posture> WorkerClient::GetPosture() {
  ASSIGN_OR_RETURN(ClientResponse r, CallApi(address_, "GET", "/v1/posture"));
  if (r.status != 200) return ErrorOf(r);
  ASSIGN_OR_RETURN(Json j, ParseBody(r));
  return Posture{Str(j, "line"), Str(j, "refusal")};
}

Result<WorkerClient::Planned> WorkerClient::Plan(const RunSpec& spec) {
  ASSIGN_OR_RETURN(ClientResponse r,
                   CallApi(address_, "POST", "/v1/admission", RunSpecToJson(spec)));
  if (r.status != 200) return ErrorOf(r);
  ASSIGN_OR_RETURN(Json j, ParseBody(r));
  Planned p;
  p.admission.admitted = j.value("admitted", false);
  auto plan = ParsePlan(Str(j, "plan"));
  if (!plan.ok()) return plan.status();
  p.admission.decision.plan = *plan;
  p.admission.namespace_name = Str(j, "namespace");
  p.admission.reason = Str(j, "reason");
  p.run_id = Str(j, "run_id");
  return p;
}

Result<RunRecord> WorkerClient::Submit(const RunSpec& spec, const std::string& idempotency_key,
                                       const std::string& name) {
  std::map<std::string, std::string> headers;
  if (!idempotency_key.empty()) headers["Idempotency-Key"] = idempotency_key;
  // Names are [A-Za-z0-9._-] (CheckRunName): nothing to percent-encode.
  std::string target = name.empty() ? "/v1/runs" : "/v1/runs?name=" + name;
  ASSIGN_OR_RETURN(ClientResponse r,
                   CallApi(address_, "POST", target, RunSpecToJson(spec), headers));
  if (r.status == 201 || r.status == 200) {  // 200: the key's first run (a replay)
    ASSIGN_OR_RETURN(Json j, ParseBody(r));
    return RecordOf(j);
  }
  if (r.status == 422) {
    ASSIGN_OR_RETURN(Json j, ParseBody(r));
    if (j.contains("record")) return RecordOf(j["record"]);
  }
  return ErrorOf(r);
}

Result<std::vector<RunRecord>> WorkerClient::List(const RunListOptions& options) {
  std::string target = fmt::format("/v1/runs?limit={}&offset={}", options.limit, options.offset);
  if (options.state) target += fmt::format("&state={}", RunStateName(*options.state));
  ASSIGN_OR_RETURN(ClientResponse r, CallApi(address_, "GET", target));
  if (r.status != 200) return ErrorOf(r);
  ASSIGN_OR_RETURN(Json j, ParseBody(r));
  std::vector<RunRecord> out;
  if (!j.contains("runs") || !j["runs"].is_array()) return InternalError("worker API: no runs");
  for (const Json& rec : j["runs"]) {
    ASSIGN_OR_RETURN(RunRecord parsed, RecordOf(rec));
    out.push_back(std::move(parsed));
  }
  return out;
}

Result<RunRecord> WorkerClient::Get(const std::string& id) {
  if (!IsValidRunId(id)) return NotFoundError(fmt::format("no run \"{}\"", id));
  ASSIGN_OR_RETURN(ClientResponse r, CallApi(address_, "GET", "/v1/runs/" + id));
  if (r.status != 200) return ErrorOf(r);
  ASSIGN_OR_RETURN(Json j, ParseBody(r));
  return RecordOf(j);
}

Status WorkerClient::Cancel(const std::string& id) {
  if (!IsValidRunId(id)) return NotFoundError(fmt::format("no run \"{}\"", id));
  ASSIGN_OR_RETURN(ClientResponse r, CallApi(address_, "POST", "/v1/runs/" + id + "/cancel"));
  if (r.status != 202) return ErrorOf(r);
  return OkStatus();
}

Status WorkerClient::Logs(const std::string& id, bool follow, int out_fd, int err_fd) {
  if (!IsValidRunId(id)) return NotFoundError(fmt::format("no run \"{}\"", id));
  LogFrameDecoder decoder;
  Status write_error;
  ASSIGN_OR_RETURN(
      ClientResponse r,
      CallApi(address_, "GET",
              fmt::format("/v1/runs/{}/logs?follow={}", id, follow ? "true" : "false"), "", {},
              [&](std::string_view data) {
                return decoder.Feed(data, [&](std::string_view tag, std::string_view d) {
                  Status s = WriteAll(tag == "stderr" ? err_fd : out_fd, d);
                  if (!s.ok()) write_error = s;
                }) && write_error.ok();
              }));
  if (r.status != 200) return ErrorOf(r);
  return write_error;
}

}  // namespace codespace::api
