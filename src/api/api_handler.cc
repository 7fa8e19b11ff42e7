#include "api/api_handler.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "api/posture_value.h"
#include "api/spec_check.h"
#include "api/usage_metrics.h"
#include "base/unique_fd.h"
#include "plan/admission.h"
#include "run/run_labels.h"
#include "store/record_json.h"
#include "worker/worker.h"

namespace codespace::api {
namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

HttpResponse JsonResponse(int status, const Json& body) {
  HttpResponse r;
  r.status = status;
  r.body = Dump(body);
  return r;
}

// The record as the store's own JSON (one format everywhere), parsed back into the tree so it
// can sit inside a larger answer.
Json RecordValue(const RunRecord& record) {
  return Json::parse(RunRecordToJson(record), nullptr, false);
}

HttpResponse StatusResponse(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound:
      return ErrorResponse(404, s.message());
    case StatusCode::kInvalidArgument:
      return ErrorResponse(400, s.message());
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAborted:
    case StatusCode::kAlreadyExists:
      return ErrorResponse(409, s.message());
    case StatusCode::kUnavailable:
      return ErrorResponse(503, s.message());
    default:
      return ErrorResponse(500, s.message());
  }
}

HttpResponse SpecErrorResponse(const SpecError& e) {
  return ErrorResponse(400, e.message, e.field);
}

// Parses and checks a submitted spec; on failure fills *error.
std::optional<RunSpec> SpecFromRequest(const HttpRequest& req, const std::string& state_dir,
                                       HttpResponse* error) {
  // The media type alone (parameters such as charset ignored); a repeated header (joined with
  // ", ") never matches.
  std::string ct = req.Header("content-type");
  ct = ct.substr(0, ct.find(';'));
  while (!ct.empty() && ct.back() == ' ') ct.pop_back();
  for (char& c : ct) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!ct.empty() && ct != "application/json") {
    *error = ErrorResponse(415, "Content-Type must be application/json", "Content-Type");
    return std::nullopt;
  }
  SpecResult parsed = ParseSubmittedSpec(req.body);
  if (auto* e = std::get_if<SpecError>(&parsed)) {
    *error = SpecErrorResponse(*e);
    return std::nullopt;
  }
  RunSpec spec = std::get<RunSpec>(std::move(parsed));
  SpecError host = CheckSpecOnHost(spec, state_dir);
  if (!host.message.empty()) {
    *error = SpecErrorResponse(host);
    return std::nullopt;
  }
  return spec;
}

std::optional<size_t> ParseSize(const std::string& text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  size_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  return n;
}

// "/v1/runs/{id}[/rest]" → id and rest.
bool SplitRunPath(const std::string& path, std::string* id, std::string* rest) {
  constexpr std::string_view kPrefix = "/v1/runs/";
  if (path.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  std::string tail = path.substr(kPrefix.size());
  size_t slash = tail.find('/');
  *id = tail.substr(0, slash);
  *rest = slash == std::string::npos ? "" : tail.substr(slash);
  return !id->empty();
}

// A Prometheus histogram of run setup times, one series per network posture. Bounds are kept in
// whole milliseconds, as records carry them, so bucketing is exact (no float comparisons).
class SetupHistogram {
 public:
  SetupHistogram() {
    // Every posture a started run can have, always exported (zeros included), so a dashboard's
    // series exist before the first run of each kind.
    for (NetworkPosture n :
         {NetworkPosture::kFiltered, NetworkPosture::kSevered, NetworkPosture::kShared}) {
      series_[std::string(NetworkPostureName(n))];
    }
  }
  void Observe(NetworkPosture network, int64_t setup_ms) {
    Series& s = series_[std::string(NetworkPostureName(network))];
    for (size_t i = 0; i < std::size(kBoundsMs); ++i) {
      if (setup_ms <= kBoundsMs[i]) s.buckets[i]++;
    }
    s.sum_ms += setup_ms;
    s.count++;
  }
  void Render(std::string& out) const {
    out +=
        "# HELP codespace_run_setup_seconds Sandbox and network setup of runs, from the "
        "supervisor's launch to the sandbox reporting started (records' setup_ms).\n"
        "# TYPE codespace_run_setup_seconds histogram\n";
    for (const auto& [network, s] : series_) {
      for (size_t i = 0; i < std::size(kBoundsMs); ++i) {
        out += fmt::format("codespace_run_setup_seconds_bucket{{network=\"{}\",le=\"{}\"}} {}\n",
                           network, kBoundLabels[i], s.buckets[i]);
      }
      out += fmt::format("codespace_run_setup_seconds_bucket{{network=\"{}\",le=\"+Inf\"}} {}\n",
                         network, s.count);
      out += fmt::format("codespace_run_setup_seconds_sum{{network=\"{}\"}} {}\n", network,
                         static_cast<double>(s.sum_ms) / 1000.0);
      out +=
          fmt::format("codespace_run_setup_seconds_count{{network=\"{}\"}} {}\n", network, s.count);
    }
  }

 private:
  // Prometheus's default buckets: setup runs from milliseconds (bubblewrap alone) to seconds
  // (a filtered network's namespace, veth, nftables and DNS gate on a loaded host).
  static constexpr int64_t kBoundsMs[] = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};
  static constexpr const char* kBoundLabels[] = {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25",
                                                 "0.5",   "1",    "2.5",   "5",    "10"};
  static_assert(std::size(kBoundsMs) == std::size(kBoundLabels));
  struct Series {
    uint64_t buckets[std::size(kBoundsMs)] = {};  // cumulative: each counts setup <= its bound
    int64_t sum_ms = 0;
    uint64_t count = 0;
  };
  std::map<std::string, Series> series_;
};

HttpResponse MethodNotAllowed(std::string_view allowed) {
  HttpResponse r = ErrorResponse(405, fmt::format("method not allowed; use {}", allowed));
  r.headers.emplace_back("Allow", std::string(allowed));
  return r;
}

}  // namespace

HttpResponse ApiHandler::Posture(const HttpRequest&, const std::string&) {
  return JsonResponse(200, PostureValue(facts_));
}

HttpResponse ApiHandler::AdmissionOf(const HttpRequest& req, const std::string&) {
  HttpResponse error;
  auto spec = SpecFromRequest(req, state_dir_, &error);
  if (!spec) return error;
  // What creating the run would refuse, the admission refuses in the same words.
  if (Status w = runner_.CheckWildcards(*spec); !w.ok()) return StatusResponse(w);
  std::string id = NewRunId();
  Admission a = runner_.Plan(*spec, id);
  Json j;
  j["admitted"] = a.admitted;
  j["plan"] = std::string(PlanName(a.decision.plan));
  j["network"] = std::string(NetworkPostureName(PostureOfPlan(a.decision.plan)));
  j["namespace"] = a.namespace_name;
  j["reason"] = a.reason;
  j["run_id"] = id;  // the id the predicted namespace is for (not reserved)
  return JsonResponse(200, j);
}

HttpResponse ApiHandler::CreateRun(const HttpRequest& req, const std::string&) {
  HttpResponse error;
  auto spec = SpecFromRequest(req, state_dir_, &error);
  if (!spec) return error;
  // Submitting exactly once: a request carrying a key already used answers with that key's
  // first run (200, Idempotent-Replayed) instead of creating a second one.
  CreateOptions labels;
  labels.idempotency_key = req.Header("idempotency-key");
  if (auto n = req.query.find("name"); n != req.query.end()) labels.name = n->second;
  if (!labels.idempotency_key.empty()) {
    if (Status k = CheckIdempotencyKey(labels.idempotency_key); !k.ok()) {
      return ErrorResponse(400, k.message(), "Idempotency-Key");
    }
  }
  if (!labels.name.empty()) {
    if (Status n = CheckRunName(labels.name); !n.ok())
      return ErrorResponse(400, n.message(), "name");
  }
  bool replayed = false;
  Result<RunRecord> created = runner_.Create(*spec, labels, &replayed);
  if (!created.ok()) return StatusResponse(created.status());
  if (replayed && created->state != RunState::kRefused) {
    HttpResponse r = JsonResponse(200, RecordValue(*created));
    r.headers.emplace_back("Idempotent-Replayed", "true");
    r.headers.emplace_back("Location", "/v1/runs/" + created->id);
    return r;
  }
  if (created->state == RunState::kRefused) {
    Json j;
    j["error"] = created->reason;
    j["record"] = RecordValue(*created);
    return JsonResponse(422, j);
  }
  if (on_queued_) on_queued_();
  HttpResponse r = JsonResponse(201, RecordValue(*created));
  r.headers.emplace_back("Location", "/v1/runs/" + created->id);
  return r;
}

HttpResponse ApiHandler::ListRuns(const HttpRequest& req, const std::string&) {
  RunListOptions opts;
  for (const auto& [key, value] : req.query) {
    if (key == "state") {
      auto s = ParseRunState(value);
      if (!s.ok()) return ErrorResponse(400, s.status().message(), "state");
      opts.state = *s;
    } else if (key == "limit") {
      auto n = ParseSize(value);
      if (!n || *n < 1 || *n > 1000) {
        return ErrorResponse(400, "limit must be an integer 1..1000", "limit");
      }
      opts.limit = *n;
    } else if (key == "offset") {
      auto n = ParseSize(value);
      if (!n) return ErrorResponse(400, "offset must be a non-negative integer", "offset");
      opts.offset = *n;
    } else {
      return ErrorResponse(400, fmt::format("unknown query parameter \"{}\"", key), key);
    }
  }
  auto runs = store_->List(opts);
  if (!runs.ok()) return StatusResponse(runs.status());
  Json list = Json::array();
  for (const RunRecord& r : *runs) list.push_back(RecordValue(r));
  Json j;
  j["runs"] = std::move(list);
  j["limit"] = opts.limit;
  j["offset"] = opts.offset;
  return JsonResponse(200, j);
}

HttpResponse ApiHandler::MetricsPage(const HttpRequest&, const std::string&) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = Metrics();
  return r;
}

HttpResponse ApiHandler::GetRun(const HttpRequest&, const std::string& id) {
  auto rec = store_->Get(id);
  if (!rec.ok()) return StatusResponse(rec.status());
  return JsonResponse(200, RecordValue(*rec));
}

HttpResponse ApiHandler::CancelRun(const HttpRequest&, const std::string& id) {
  auto rec = store_->Get(id);
  if (!rec.ok()) return StatusResponse(rec.status());
  if (IsTerminal(rec->state)) {
    return ErrorResponse(409, fmt::format("run {} is already {}", id, RunStateName(rec->state)));
  }
  Status s = RequestCancel(*store_, state_dir_, id);
  if (!s.ok()) return StatusResponse(s);
  auto after = store_->Get(id);
  if (!after.ok()) return StatusResponse(after.status());
  return JsonResponse(202, RecordValue(*after));
}

HttpResponse ApiHandler::LogsNotStreamed(const HttpRequest&, const std::string&) {
  // Streamed by Handle; here only when called directly.
  return ErrorResponse(400, "logs are streamed; use Handle");
}

// The routes: a path (a run's as /v1/runs/{id}...), a method, what answers. A path that matches
// with another method is a 405 naming the methods it has, in this order.
const ApiHandler::Route ApiHandler::kRoutes[] = {
    {"/v1/posture", "GET", &ApiHandler::Posture},
    {"/v1/admission", "POST", &ApiHandler::AdmissionOf},
    {"/v1/runs", "GET", &ApiHandler::ListRuns},
    {"/v1/runs", "POST", &ApiHandler::CreateRun},
    {"/metrics", "GET", &ApiHandler::MetricsPage},
    {"/v1/runs/{id}", "GET", &ApiHandler::GetRun},
    {"/v1/runs/{id}/cancel", "POST", &ApiHandler::CancelRun},
    {"/v1/runs/{id}/logs", "GET", &ApiHandler::LogsNotStreamed},
};

HttpResponse ApiHandler::Respond(const HttpRequest& req) {
  auto answer = [&](std::string_view shape, const std::string& id) -> std::optional<HttpResponse> {
    std::string allowed;
    for (const Route& r : kRoutes) {
      if (r.path != shape) continue;
      if (r.method == req.method) return (this->*r.answer)(req, id);
      allowed += (allowed.empty() ? "" : ", ") + std::string(r.method);
    }
    if (!allowed.empty()) return MethodNotAllowed(allowed);
    return std::nullopt;
  };
  if (auto r = answer(req.path, "")) return *r;
  std::string id, rest;
  if (SplitRunPath(req.path, &id, &rest)) {
    if (!IsValidRunId(id)) return ErrorResponse(404, fmt::format("no run \"{}\"", id), "id");
    if (auto r = answer("/v1/runs/{id}" + rest, id)) return *r;
  }
  return ErrorResponse(404, fmt::format("no route {} {}", req.method, req.path));
}

bool ApiHandler::Handle(const HttpRequest& req, ResponseWriter& out,
                        const std::atomic<bool>& stop) {
  std::string id, rest;
  if (req.method == "GET" && SplitRunPath(req.path, &id, &rest) && rest == "/logs" &&
      IsValidRunId(id)) {
    return StreamLogs(req, id, out, stop);
  }
  HttpResponse r = Respond(req);
  return out.Write(SerializeResponse(r, req.keep_alive)) && req.keep_alive;
}

bool ApiHandler::StreamLogs(const HttpRequest& req, const std::string& id, ResponseWriter& out,
                            const std::atomic<bool>& stop) {
  auto fail = [&](const HttpResponse& r) {
    return out.Write(SerializeResponse(r, req.keep_alive)) && req.keep_alive;
  };
  bool want[2] = {true, true};
  bool framed = true;
  bool follow = true;
  for (const auto& [key, value] : req.query) {
    if (key == "stream") {
      if (value == "stdout") {
        want[1] = false;
        framed = false;
      } else if (value == "stderr") {
        want[0] = false;
        framed = false;
      } else if (value != "both") {
        return fail(ErrorResponse(400, "stream must be stdout, stderr or both", "stream"));
      }
    } else if (key == "follow") {
      if (value == "true" || value == "1") {
        follow = true;
      } else if (value == "false" || value == "0") {
        follow = false;
      } else {
        return fail(ErrorResponse(400, "follow must be true or false", "follow"));
      }
    } else {
      return fail(ErrorResponse(400, fmt::format("unknown query parameter \"{}\"", key), key));
    }
  }
  auto rec = store_->Get(id);
  if (!rec.ok()) return fail(StatusResponse(rec.status()));

  if (!out.Write(ChunkedResponseHead(
          200, framed ? "application/vnd.codespace.log-frames" : "application/octet-stream",
          req.keep_alive))) {
    return false;
  }
  RunLogPaths logs = LogPathsOf(state_dir_, id);
  const std::string paths[2] = {logs.stdout_path, logs.stderr_path};
  const char* tags[2] = {"stdout", "stderr"};
  UniqueFd fds[2];
  std::vector<char> buf(64 * 1024);
  // Copies what is new; false when the client is gone.
  auto pump = [&](size_t* copied) {
    for (int i = 0; i < 2; ++i) {
      if (!want[i]) continue;
      if (!fds[i]) {
        auto fd = OpenFile(paths[i].c_str(), O_RDONLY);
        if (!fd.ok()) continue;  // not there yet
        fds[i] = std::move(*fd);
      }
      for (;;) {
        ssize_t n = ::read(fds[i].get(), buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        std::string_view data(buf.data(), static_cast<size_t>(n));
        std::string frame =
            framed ? fmt::format("{} {}\n", tags[i], n) + std::string(data) : std::string(data);
        if (!out.Write(ChunkFrame(frame))) return false;
        *copied += static_cast<size_t>(n);
      }
    }
    return true;
  };
  bool terminal = IsTerminal(rec->state);
  auto last_check = std::chrono::steady_clock::now();
  for (;;) {
    size_t copied = 0;
    if (!pump(&copied)) return false;
    if (!follow || terminal) break;
    if (stop.load()) return false;  // no clean end: the client sees the stream cut
    if (copied == 0) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    auto now = std::chrono::steady_clock::now();
    if (now - last_check >= std::chrono::milliseconds(200)) {
      last_check = now;
      auto again = store_->Get(id);
      // Terminal: the record was written from status.json, so the logs are sealed; one more
      // pump (the next loop turn) drains what came since.
      if (again.ok()) terminal = IsTerminal(again->state);
    }
  }
  return out.Write(ChunkFrame("")) && req.keep_alive;
}

std::string ApiHandler::Metrics() {
  std::map<std::string, uint64_t> by_state, by_network;
  for (RunState s : {RunState::kQueued, RunState::kRunning, RunState::kExited, RunState::kAborted,
                     RunState::kRefused, RunState::kCancelled, RunState::kLost}) {
    by_state[std::string(RunStateName(s))] = 0;
  }
  for (NetworkPosture n : {NetworkPosture::kNotRun, NetworkPosture::kFiltered,
                           NetworkPosture::kSevered, NetworkPosture::kShared}) {
    by_network[std::string(NetworkPostureName(n))] = 0;
  }
  uint64_t refused_names = 0, dropped = 0, broker_to = 0, broker_from = 0, broker_conns = 0,
           broker_failed = 0;
  SetupHistogram setup;
  UsageMetrics usage;
  bool store_ok = true;
  RunListOptions opts;
  opts.limit = 1000;
  for (;;) {
    auto page = store_->List(opts);
    if (!page.ok()) {
      store_ok = false;
      break;
    }
    for (const RunRecord& r : *page) {
      by_state[std::string(RunStateName(r.state))]++;
      by_network[std::string(NetworkPostureName(r.network))]++;
      refused_names += r.network_report.dns_refused.size();
      dropped += r.network_report.dropped_packets;
      broker_to += r.network_report.broker_bytes_to;
      broker_from += r.network_report.broker_bytes_from;
      broker_conns += r.network_report.broker_connections;
      broker_failed += r.network_report.broker_failed;
      if (r.setup_ms && *r.setup_ms >= 0) setup.Observe(r.network, *r.setup_ms);
      usage.Observe(r);
    }
    if (page->size() < opts.limit) break;
    opts.offset += opts.limit;
  }
  std::string out;
  out += "# HELP codespace_store_up Whether the run store answered.\n";
  out += "# TYPE codespace_store_up gauge\n";
  out += fmt::format("codespace_store_up {}\n", store_ok ? 1 : 0);
  out += "# HELP codespace_runs Runs in the store, by state.\n# TYPE codespace_runs gauge\n";
  for (const auto& [k, v] : by_state)
    out += fmt::format("codespace_runs{{state=\"{}\"}} {}\n", k, v);
  out +=
      "# HELP codespace_runs_by_network Runs in the store, by network posture.\n"
      "# TYPE codespace_runs_by_network gauge\n";
  for (const auto& [k, v] : by_network) {
    out += fmt::format("codespace_runs_by_network{{network=\"{}\"}} {}\n", k, v);
  }
  out +=
      "# HELP codespace_dns_refused_names_total DNS names refused by runs' gates, summed from "
      "records.\n# TYPE codespace_dns_refused_names_total counter\n";
  out += fmt::format("codespace_dns_refused_names_total {}\n", refused_names);
  out +=
      "# HELP codespace_dropped_packets_total Packets dropped by runs' firewalls, summed from "
      "records.\n# TYPE codespace_dropped_packets_total counter\n";
  out += fmt::format("codespace_dropped_packets_total {}\n", dropped);
  out +=
      "# HELP codespace_broker_bytes_total Bytes relayed to and from brokers, summed from "
      "records.\n# TYPE codespace_broker_bytes_total counter\n";
  out += fmt::format("codespace_broker_bytes_total{{direction=\"to_broker\"}} {}\n", broker_to);
  out += fmt::format("codespace_broker_bytes_total{{direction=\"from_broker\"}} {}\n", broker_from);
  out +=
      "# HELP codespace_broker_connections_total Broker connections, summed from records.\n"
      "# TYPE codespace_broker_connections_total counter\n";
  out += fmt::format("codespace_broker_connections_total{{result=\"ok\"}} {}\n",
                     broker_conns >= broker_failed ? broker_conns - broker_failed : 0);
  out += fmt::format("codespace_broker_connections_total{{result=\"failed\"}} {}\n", broker_failed);
  usage.Render(out);
  setup.Render(out);
  return out;
}

}  // namespace codespace::api
