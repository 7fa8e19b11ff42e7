// ApiHandler: the worker API's routes, over values and a RunStore — no sockets (api_server.h
// serves it). Every answer is JSON except /metrics (Prometheus text) and the log stream.
//
//   GET  /v1/posture               the host facts and the posture line
//   POST /v1/admission             run spec → {admitted, plan, network, namespace, reason, run_id};
//                                  nothing recorded, nothing spent
//   POST /v1/runs                  admit and queue: 201 {record}; 422 {error, record} when refused
//   GET  /v1/runs                  {runs: [...]}; ?state=, ?limit= (1..1000, default 100), ?offset=
//   GET  /v1/runs/{id}             the record
//   GET  /v1/runs/{id}/logs        chunked; ?stream=stdout|stderr|both (default both),
//                                  ?follow=true|false (default true). See StreamLogs.
//   POST /v1/runs/{id}/cancel      202 {record} after RequestCancel; 409 when already over
//   GET  /metrics                  Prometheus text exposition 0.0.4
//
// Errors are {"error": "...", "field": "..."} with a 4xx status (field only when one field is
// at fault); 5xx only for codespace's own failures (the store).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>

#include "api/http.h"
#include "posture/host_facts.h"
#include "store/run_store.h"
#include "worker/local_runner.h"

namespace codespace::api {

// Where a response goes. Write returns false when the peer is gone.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  virtual bool Write(std::string_view bytes) = 0;
};

class ApiHandler {
 public:
  ApiHandler(HostFacts facts, RunStore* store, std::string state_dir)
      : facts_(std::move(facts)),
        store_(store),
        state_dir_(std::move(state_dir)),
        runner_(facts_, store) {}

  // Answers one request. Returns false when the connection must be closed afterwards (a
  // failed write, or a stream that ended without a clean last chunk). `stop`: the server is
  // shutting down; long streams end early.
  bool Handle(const HttpRequest& request, ResponseWriter& out, const std::atomic<bool>& stop);

  // The non-streaming routes, as a value (tests and the fuzzer use it directly).
  HttpResponse Respond(const HttpRequest& request);

  // The log stream of a run. With stream=both the body is a sequence of frames, one per chunk:
  //   "<stdout|stderr> <decimal length>\n<length bytes>"
  // (Content-Type application/vnd.codespace.log-frames); with one stream, the raw bytes
  // (application/octet-stream). Both files are read as they grow; with follow=true the stream
  // ends once the run's record is terminal (its logs then sealed) and the files are drained.
  bool StreamLogs(const HttpRequest& request, const std::string& run_id, ResponseWriter& out,
                  const std::atomic<bool>& stop);

  std::string Metrics();

  // Called after a run is queued (the worker's wake-up, so it starts the run at once).
  void OnQueued(std::function<void()> f) { on_queued_ = std::move(f); }

 private:
  // One route of Respond's table (api_handler.cc kRoutes); `id` is the run's, or empty.
  struct Route {
    std::string_view path;
    std::string_view method;
    HttpResponse (ApiHandler::*answer)(const HttpRequest& request, const std::string& id);
  };
  static const Route kRoutes[];
  HttpResponse Posture(const HttpRequest& request, const std::string& id);
  HttpResponse AdmissionOf(const HttpRequest& request, const std::string& id);
  HttpResponse CreateRun(const HttpRequest& request, const std::string& id);
  HttpResponse ListRuns(const HttpRequest& request, const std::string& id);
  HttpResponse MetricsPage(const HttpRequest& request, const std::string& id);
  HttpResponse GetRun(const HttpRequest& request, const std::string& id);
  HttpResponse CancelRun(const HttpRequest& request, const std::string& id);
  HttpResponse LogsNotStreamed(const HttpRequest& request, const std::string& id);

  HostFacts facts_;
  RunStore* store_;
  std::string state_dir_;
  LocalProcessRunner runner_;
  std::function<void()> on_queued_;
};

}  // namespace codespace::api
