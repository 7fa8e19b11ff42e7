// StubModelApi: a test broker that serves a stub model API, so that real agent CLIs (claude,
// codex) can run inside a sandbox against it through the broker relay, with dummy keys and no
// network.
//
// HTTP/1.1 on a unix socket or a loopback TCP port, a thread per connection: keep-alive,
// request bodies with Content-Length or chunked, `Expect: 100-continue`. Routes:
//
//   HEAD /, GET /                      200 text/plain (claude probes HEAD / first)
//   POST /v1/messages[?query]          Anthropic Messages. "stream": true → text/event-stream:
//                                      message_start, content_block_start, ping,
//                                      content_block_delta (text_delta, one per word of the
//                                      answer), content_block_stop, message_delta (stop_reason
//                                      end_turn, usage), message_stop. Otherwise a JSON message.
//   POST /v1/messages/count_tokens     {"input_tokens": N}
//   POST /v1/responses[?query]         OpenAI Responses. "stream": true (what codex sends) →
//                                      text/event-stream: response.created,
//                                      response.in_progress, response.output_item.added,
//                                      response.content_part.added, response.output_text.delta
//                                      (one per word), response.output_text.done,
//                                      response.content_part.done, response.output_item.done (an
//                                      assistant `message` item with `output_text` content),
//                                      response.completed (with usage). Otherwise a JSON response.
//   anything else                      404 (405 for a known path with another method), JSON error
//   a body that is not a JSON object   400, JSON error
//
// Event payloads are shaped as the real APIs send them (Anthropic's "Streaming Messages" and
// OpenAI's "Responses streaming events" references): each SSE event is `event: <type>` plus one
// `data: <json>` line whose "type" repeats the event name; every Responses event carries a
// sequence_number counting from 0. Streams are sent with Transfer-Encoding: chunked, one chunk per
// event, as the real services do. The model in an answer is the request's "model" when it names
// one.
//
// Every request is recorded (method, path, query, headers, body) for the tests to inspect.
// Stop() (and the destructor) shuts down open connections, idle keep-alive ones included, and
// joins every thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "relay/relay_test_util.h"

namespace codespace::lanes {

struct StubModelApiOptions {
  std::string answer = "stub says hi";
  // Used when a request names no model.
  std::string anthropic_model = "claude-stub";
  std::string openai_model = "gpt-stub";
  // Pause before each SSE event (0: none), to exercise a client's streaming.
  std::chrono::milliseconds event_delay{0};
};

// One request as the stub received it.
struct StubRequest {
  std::string method;  // "POST"
  std::string target;  // as sent: "/v1/messages?beta=true"
  std::string path;    // "/v1/messages"
  std::string query;   // "beta=true" (without '?'; empty when none)
  // Header names in lower case; repeated headers joined with ", ". Kept: host, user-agent,
  // accept, content-type, content-length, transfer-encoding, authorization, x-api-key,
  // anthropic-version, anthropic-beta, openai-beta, connection, and every x-* header.
  std::map<std::string, std::string> headers;
  std::string body;  // decoded (chunked bodies joined)
  int status = 0;    // the status the stub answered with
};

// The SSE bodies and JSON documents the stub sends, as pure functions (tests check their shape).
// `id` seeds the object ids ("msg_stub_<id>", "resp_stub_<id>").
std::string AnthropicStreamEvents(const std::string& answer, const std::string& model, uint64_t id);
std::string AnthropicMessageJson(const std::string& answer, const std::string& model, uint64_t id);
std::string OpenAiResponsesStreamEvents(const std::string& answer, const std::string& model,
                                        uint64_t id);
std::string OpenAiResponseJson(const std::string& answer, const std::string& model, uint64_t id);
// Splits an SSE body into its events' blocks ("event: x\ndata: {...}\n"), without the blank line.
std::vector<std::string> SplitSseEvents(const std::string& body);

class StubModelApi {
 public:
  // Listens on a unix socket at `path` (a stale socket file is replaced; mode 0666).
  static Result<std::unique_ptr<StubModelApi>> StartUnix(const std::string& path,
                                                         StubModelApiOptions options = {});
  // Listens on 127.0.0.1:port (0: a free port; see port()).
  static Result<std::unique_ptr<StubModelApi>> StartTcp(uint16_t port = 0,
                                                        StubModelApiOptions options = {});

  StubModelApi(const StubModelApi&) = delete;
  StubModelApi& operator=(const StubModelApi&) = delete;
  ~StubModelApi();

  // Shuts every connection down and joins all threads; removes a unix socket file. Idempotent.
  void Stop();

  // What --broker takes: "unix:/path" or "127.0.0.1:PORT".
  std::string broker_address() const;
  uint16_t port() const { return port_; }                          // TCP only
  const std::string& socket_path() const { return socket_path_; }  // unix only

  std::vector<StubRequest> requests() const;
  // The recorded requests whose path is `path`.
  std::vector<StubRequest> RequestsTo(const std::string& path) const;
  void ClearRequests();
  int connections_accepted() const { return server_ ? server_->accepted() : 0; }

 private:
  explicit StubModelApi(StubModelApiOptions options) : options_(std::move(options)) {}
  static Result<std::unique_ptr<StubModelApi>> StartOn(UniqueFd listener,
                                                       StubModelApiOptions options);
  void Serve(int fd);
  // Answers one request; false when the connection must close afterwards.
  bool Respond(int fd, StubRequest& request, bool keep_alive);
  void Record(const StubRequest& request);

  StubModelApiOptions options_;
  std::string socket_path_;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::vector<StubRequest> requests_;
  std::atomic<uint64_t> next_id_{1};
  // The connections, a thread each (the relay tests' broker); declared last, so that it is
  // stopped before the state its handlers use goes.
  std::unique_ptr<relay_testing::TestBroker> server_;
};

}  // namespace codespace::lanes
