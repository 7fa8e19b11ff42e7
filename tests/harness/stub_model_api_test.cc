#include "harness/stub_model_api.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "relay/broker_bridge.h"
#include "relay/relay.h"

namespace codespace::lanes {
namespace {

using Json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// A minimal HTTP/1.1 client: one connection, requests in sequence (keep-alive).

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
};

class HttpClient {
 public:
  static Result<HttpClient> ConnectTcp(uint16_t port) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return ErrnoError("socket", errno);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      return ErrnoError("connect", errno);
    }
    return HttpClient(std::move(fd));
  }
  static Result<HttpClient> ConnectUnix(const std::string& path) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return ErrnoError("socket", errno);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.data(), path.size());
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      return ErrnoError("connect", errno);
    }
    return HttpClient(std::move(fd));
  }

  struct Request {
    std::string method = "GET";
    std::string target = "/";
    std::vector<std::string> headers;  // "Name: value"
    std::string body;
    bool chunked = false;          // send the body in chunks of 7 bytes
    bool expect_continue = false;  // wait for "100 Continue" before the body
  };

  Result<HttpResponse> Send(const Request& r) {
    std::string head = r.method + " " + r.target + " HTTP/1.1\r\nHost: stub\r\n";
    for (const auto& h : r.headers) head += h + "\r\n";
    if (r.chunked) {
      head += "Transfer-Encoding: chunked\r\n";
    } else if (!r.body.empty() || r.method == "POST") {
      head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
    }
    if (r.expect_continue) head += "Expect: 100-continue\r\n";
    head += "\r\n";
    RETURN_IF_ERROR(WriteAll(fd_.get(), head));
    if (r.expect_continue) {
      ASSIGN_OR_RETURN(std::string interim, Line());
      if (interim.rfind("HTTP/1.1 100", 0) != 0) {
        return InternalError("expected 100 Continue, got: " + interim);
      }
      ASSIGN_OR_RETURN(std::string blank, Line());
      if (!blank.empty()) return InternalError("no blank line after 100 Continue");
    }
    if (r.chunked) {
      std::string out;
      for (size_t i = 0; i < r.body.size(); i += 7) {
        std::string piece = r.body.substr(i, 7);
        char size[16];
        std::snprintf(size, sizeof(size), "%zx;ext=1\r\n", piece.size());
        out += size + piece + "\r\n";
      }
      out += "0\r\nTrailer-Thing: x\r\n\r\n";
      RETURN_IF_ERROR(WriteAll(fd_.get(), out));
    } else {
      RETURN_IF_ERROR(WriteAll(fd_.get(), r.body));
    }
    return ReadResponse(r.method == "HEAD");
  }

  Result<HttpResponse> Post(const std::string& target, const std::string& body,
                            std::vector<std::string> headers = {}) {
    Request r;
    r.method = "POST";
    r.target = target;
    r.body = body;
    r.headers = std::move(headers);
    r.headers.push_back("Content-Type: application/json");
    return Send(r);
  }

  int fd() const { return fd_.get(); }

 private:
  explicit HttpClient(UniqueFd fd) : fd_(std::move(fd)) {}

  Status Fill() {
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return UnavailableError("no response within 5 s");
    char buf[16384];
    ssize_t n = ::read(fd_.get(), buf, sizeof(buf));
    if (n < 0) return ErrnoError("read", errno);
    if (n == 0) return UnavailableError("EOF");
    buf_.append(buf, static_cast<size_t>(n));
    return OkStatus();
  }
  Result<std::string> Line() {
    for (;;) {
      size_t end = buf_.find("\r\n");
      if (end != std::string::npos) {
        std::string line = buf_.substr(0, end);
        buf_.erase(0, end + 2);
        return line;
      }
      RETURN_IF_ERROR(Fill());
    }
  }
  Result<std::string> Take(size_t n) {
    while (buf_.size() < n) RETURN_IF_ERROR(Fill());
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }
  Result<HttpResponse> ReadResponse(bool head) {
    HttpResponse resp;
    ASSIGN_OR_RETURN(std::string status_line, Line());
    if (status_line.rfind("HTTP/1.1 ", 0) != 0) return InternalError("bad status: " + status_line);
    resp.status = std::atoi(status_line.c_str() + 9);
    for (;;) {
      ASSIGN_OR_RETURN(std::string line, Line());
      if (line.empty()) break;
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      resp.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    if (head) return resp;
    if (resp.headers["transfer-encoding"] == "chunked") {
      for (;;) {
        ASSIGN_OR_RETURN(std::string size_line, Line());
        size_t size = std::stoul(size_line, nullptr, 16);
        if (size == 0) {
          ASSIGN_OR_RETURN(std::string blank, Line());
          break;
        }
        ASSIGN_OR_RETURN(std::string chunk, Take(size + 2));
        resp.body += chunk.substr(0, size);
      }
    } else {
      ASSIGN_OR_RETURN(resp.body, Take(std::stoul(resp.headers["content-length"])));
    }
    return resp;
  }

  UniqueFd fd_;
  std::string buf_;
};

// An SSE body as (event name, data JSON) pairs, checking the framing on the way.
struct SseEvent {
  std::string name;
  Json data;
};
std::vector<SseEvent> ParseSse(const std::string& body) {
  std::vector<SseEvent> out;
  for (const std::string& block : SplitSseEvents(body)) {
    SseEvent e;
    size_t nl = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    e.name = block.substr(7, nl - 7);
    std::string data_line = block.substr(nl + 1);
    EXPECT_EQ(data_line.rfind("data: ", 0), 0u) << block;
    EXPECT_EQ(data_line.back(), '\n');
    e.data = Json::parse(data_line.substr(6), nullptr, false);
    EXPECT_FALSE(e.data.is_discarded()) << block;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> Names(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.name);
  return out;
}

const char kClaudeBody[] = R"({"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,)"
                           R"("messages":[{"role":"user","content":"say hi"}]})";
const char kCodexBody[] =
    R"({"model":"gpt-5-codex","instructions":"be brief","stream":true,"store":false,)"
    R"("input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"say hi"}]}]})";

// ---------------------------------------------------------------------------------------------

TEST(StubModelApiTest, HeadAndGetRootOnOneKeepAliveConnection) {
  auto api = StubModelApi::StartTcp();
  ASSERT_OK(api);
  EXPECT_EQ((*api)->broker_address(), "127.0.0.1:" + std::to_string((*api)->port()));
  auto client = HttpClient::ConnectTcp((*api)->port());
  ASSERT_OK(client);
  HttpClient::Request head;
  head.method = "HEAD";
  auto h = client->Send(head);
  ASSERT_OK(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->headers["content-length"], "15");
  EXPECT_EQ(h->body, "");
  auto g = client->Send(HttpClient::Request{});
  ASSERT_OK(g);
  EXPECT_EQ(g->status, 200);
  EXPECT_EQ(g->body, "stub model api\n");
  EXPECT_EQ((*api)->connections_accepted(), 1);
  auto seen = (*api)->requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "HEAD");
  EXPECT_EQ(seen[1].method, "GET");
  EXPECT_EQ(seen[1].headers["host"], "stub");
}

// What `claude -p` sends and expects: POST /v1/messages?beta=true, "stream": true.
TEST(StubModelApiTest, AnthropicMessagesStreamOverUnixSocket) {
  TempDir dir;
  auto api = StubModelApi::StartUnix(dir.path() + "/api.sock");
  ASSERT_OK(api);
  EXPECT_EQ((*api)->broker_address(), "unix:" + dir.path() + "/api.sock");
  auto client = HttpClient::ConnectUnix((*api)->socket_path());
  ASSERT_OK(client);
  auto r = client->Post("/v1/messages?beta=true", kClaudeBody,
                        {"x-api-key: dummy", "anthropic-version: 2023-06-01",
                         "anthropic-beta: claude-code-20250219", "User-Agent: claude-cli/2.0"});
  ASSERT_OK(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["content-type"], "text/event-stream; charset=utf-8");
  auto events = ParseSse(r->body);
  EXPECT_THAT(Names(events),
              ElementsAre("message_start", "content_block_start", "ping", "content_block_delta",
                          "content_block_delta", "content_block_delta", "content_block_stop",
                          "message_delta", "message_stop"));
  std::string text;
  for (const auto& e : events) {
    EXPECT_EQ(e.data["type"], e.name);
    if (e.name == "content_block_delta") {
      EXPECT_EQ(e.data["index"], 0);
      EXPECT_EQ(e.data["delta"]["type"], "text_delta");
      text += e.data["delta"]["text"].get<std::string>();
    }
  }
  EXPECT_EQ(text, "stub says hi");
  const Json& message = events[0].data["message"];
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["model"], "claude-sonnet-4-5");
  EXPECT_TRUE(message["content"].is_array());
  EXPECT_TRUE(message["stop_reason"].is_null());
  EXPECT_TRUE(message["usage"]["input_tokens"].is_number_integer());
  EXPECT_EQ(events[1].data["content_block"], Json::parse(R"({"type":"text","text":""})"));
  EXPECT_EQ(events[7].data["delta"]["stop_reason"], "end_turn");
  EXPECT_TRUE(events[7].data["usage"]["output_tokens"].is_number_integer());

  auto seen = (*api)->RequestsTo("/v1/messages");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].target, "/v1/messages?beta=true");
  EXPECT_EQ(seen[0].query, "beta=true");
  EXPECT_EQ(seen[0].headers["x-api-key"], "dummy");
  EXPECT_EQ(seen[0].headers["anthropic-version"], "2023-06-01");
  EXPECT_EQ(seen[0].headers["anthropic-beta"], "claude-code-20250219");
  EXPECT_EQ(seen[0].body, kClaudeBody);
  EXPECT_EQ(seen[0].status, 200);
}

TEST(StubModelApiTest, AnthropicMessageWithoutStreamFromAChunkedBody) {
  StubModelApiOptions options;
  options.answer = "a longer answer, with punctuation: \"quoted\" and ünïcödé";
  auto api = StubModelApi::StartTcp(0, options);
  ASSERT_OK(api);
  auto client = HttpClient::ConnectTcp((*api)->port());
  ASSERT_OK(client);
  HttpClient::Request r;
  r.method = "POST";
  r.target = "/v1/messages";
  r.body = R"({"max_tokens":10,"messages":[{"role":"user","content":"hi"}]})";
  r.chunked = true;
  r.expect_continue = true;
  auto resp = client->Send(r);
  ASSERT_OK(resp);
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(resp->headers["content-type"], "application/json");
  Json j = Json::parse(resp->body);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["model"], "claude-stub");
  EXPECT_EQ(j["content"][0]["type"], "text");
  EXPECT_EQ(j["content"][0]["text"], options.answer);
  EXPECT_EQ(j["stop_reason"], "end_turn");
  auto seen = (*api)->requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].body, r.body);  // de-chunked
  EXPECT_EQ(seen[0].headers["transfer-encoding"], "chunked");
}

TEST(StubModelApiTest, CountTokens) {
  auto api = StubModelApi::StartTcp();
  ASSERT_OK(api);
  auto client = HttpClient::ConnectTcp((*api)->port());
  ASSERT_OK(client);
  auto r = client->Post("/v1/messages/count_tokens", kClaudeBody);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, 200);
  Json j = Json::parse(r->body);
  EXPECT_TRUE(j["input_tokens"].is_number_integer());
  EXPECT_GT(j["input_tokens"].get<int>(), 0);
}

// What `codex exec` sends and expects: POST /v1/responses, "stream": true.
TEST(StubModelApiTest, OpenAiResponsesStream) {
  auto api = StubModelApi::StartTcp();
  ASSERT_OK(api);
  auto client = HttpClient::ConnectTcp((*api)->port());
  ASSERT_OK(client);
  auto r = client->Post("/v1/responses", kCodexBody,
                        {"Authorization: Bearer dummy", "Accept: text/event-stream"});
  ASSERT_OK(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["content-type"], "text/event-stream; charset=utf-8");
  auto events = ParseSse(r->body);
  EXPECT_THAT(
      Names(events),
      ElementsAreArray({"response.created", "response.in_progress", "response.output_item.added",
                        "response.content_part.added", "response.output_text.delta",
                        "response.output_text.delta", "response.output_text.delta",
                        "response.output_text.done", "response.content_part.done",
                        "response.output_item.done", "response.completed"}));
  std::string deltas;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data["type"], events[i].name);
    EXPECT_EQ(events[i].data["sequence_number"], i);
    if (events[i].name == "response.output_text.delta") {
      deltas += events[i].data["delta"].get<std::string>();
    }
  }
  EXPECT_EQ(deltas, "stub says hi");
  const Json& created = events[0].data["response"];
  EXPECT_EQ(created["object"], "response");
  EXPECT_EQ(created["status"], "in_progress");
  EXPECT_EQ(created["model"], "gpt-5-codex");
  EXPECT_TRUE(created["output"].empty());

  const Json& item = events[9].data["item"];
  EXPECT_EQ(item["type"], "message");
  EXPECT_EQ(item["role"], "assistant");
  EXPECT_EQ(item["status"], "completed");
  EXPECT_EQ(item["content"][0]["type"], "output_text");
  EXPECT_EQ(item["content"][0]["text"], "stub says hi");
  EXPECT_EQ(events[9].data["output_index"], 0);

  const Json& done = events[10].data["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["id"], created["id"]);
  EXPECT_EQ(done["output"][0], item);
  EXPECT_TRUE(done["usage"]["input_tokens"].is_number_integer());
  EXPECT_TRUE(done["usage"]["output_tokens"].is_number_integer());
  EXPECT_EQ(done["usage"]["total_tokens"].get<int>(),
            done["usage"]["input_tokens"].get<int>() + done["usage"]["output_tokens"].get<int>());
  EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"], 0);

  auto seen = (*api)->RequestsTo("/v1/responses");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].headers["authorization"], "Bearer dummy");
  EXPECT_EQ(Json::parse(seen[0].body)["instructions"], "be brief");
}

TEST(StubModelApiTest, OpenAiResponseWithoutStream) {
  auto api = StubModelApi::StartTcp();
  ASSERT_OK(api);
  auto client = HttpClient::ConnectTcp((*api)->port());
  ASSERT_OK(client);
  auto r = client->Post("/v1/responses", R"({"input":"say hi"})");
  ASSERT_OK(r);
  EXPECT_EQ(r->status, 200);
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["model"], "gpt-stub");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "stub says hi");
}

TEST(StubModelApiTest, ErrorsAreJson) {
  auto api = StubModelApi::StartTcp();
  ASSERT_OK(api);
  auto client = HttpClient::ConnectTcp((*api)->port());
  ASSERT_OK(client);
  auto not_found = client->Post("/v1/chat/completions", "{}");
  ASSERT_OK(not_found);
  EXPECT_EQ(not_found->status, 404);
  Json j = Json::parse(not_found->body);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], "not_found_error");
  EXPECT_THAT(j["error"]["message"].get<std::string>(),
              ::testing::HasSubstr("/v1/chat/completions"));

  HttpClient::Request get_messages;
  get_messages.target = "/v1/messages";
  auto not_allowed = client->Send(get_messages);
  ASSERT_OK(not_allowed);
  EXPECT_EQ(not_allowed->status, 405);

  auto bad = client->Post("/v1/messages", "{not json");
  ASSERT_OK(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Json::parse(bad->body)["error"]["type"], "invalid_request_error");
  auto array = client->Post("/v1/responses", "[1,2]");
  ASSERT_OK(array);
  EXPECT_EQ(array->status, 400);
  auto odd_stream = client->Post("/v1/messages", R"({"stream":"yes","model":7})");
  ASSERT_OK(odd_stream);
  EXPECT_EQ(odd_stream->status, 200);  // not a stream; the default model
  EXPECT_EQ(Json::parse(odd_stream->body)["model"], "claude-stub");
  EXPECT_EQ((*api)->connections_accepted(), 1);  // all on one keep-alive connection
}

TEST(StubModelApiTest, ManyClientsAtOnce) {
  auto api = StubModelApi::StartTcp();
  ASSERT_OK(api);
  uint16_t port = (*api)->port();
  std::vector<std::future<Status>> results;
  for (int i = 0; i < 16; ++i) {
    results.push_back(std::async(std::launch::async, [port]() -> Status {
      ASSIGN_OR_RETURN(HttpClient c, HttpClient::ConnectTcp(port));
      for (int k = 0; k < 5; ++k) {
        ASSIGN_OR_RETURN(HttpResponse r, c.Post(k % 2 ? "/v1/responses" : "/v1/messages?beta=true",
                                                k % 2 ? kCodexBody : kClaudeBody));
        std::string last = k % 2 ? "response.completed" : "message_stop";
        if (r.status != 200 || ParseSse(r.body).back().name != last) {
          return InternalError("bad answer: " + r.body.substr(0, 200));
        }
      }
      return OkStatus();
    }));
  }
  for (auto& r : results) EXPECT_OK(r.get());
  EXPECT_EQ((*api)->requests().size(), 80u);
}

TEST(StubModelApiTest, StopEndsIdleKeepAliveConnectionsPromptly) {
  TempDir dir;
  auto api = StubModelApi::StartUnix(dir.path() + "/api.sock");
  ASSERT_OK(api);
  auto client = HttpClient::ConnectUnix(dir.path() + "/api.sock");
  ASSERT_OK(client);
  ASSERT_OK(client->Send(HttpClient::Request{}));
  auto start = Clock::now();
  (*api)->Stop();
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_NE(::access((dir.path() + "/api.sock").c_str(), F_OK), 0);
  char c;
  EXPECT_EQ(::read(client->fd(), &c, 1), 0);  // the server closed
}

// The whole brokered path with HTTP on it: client → TCP relay (in-sandbox half) → bridge's unix
// socket → bridge → stub on its own unix socket; keep-alive and streaming pass unchanged.
TEST(StubModelApiTest, ThroughTheBrokerRelay) {
  TempDir dir;
  StubModelApiOptions options;
  options.event_delay = std::chrono::milliseconds(2);
  auto api = StubModelApi::StartUnix(dir.path() + "/api.sock", options);
  ASSERT_OK(api);
  auto broker = ParseBrokerAddress((*api)->broker_address());
  ASSERT_OK(broker);
  auto bridge = BrokerBridge::Start(dir.path() + "/run.broker.sock", *broker);
  ASSERT_OK(bridge);
  auto listener = ListenLoopbackTcp("127.0.0.1", 0);
  ASSERT_OK(listener);
  auto port = LocalPort(listener->get());
  ASSERT_OK(port);
  auto relay =
      Relay::Create(std::move(*listener), BrokerAddress::Unix(dir.path() + "/run.broker.sock"));
  ASSERT_OK(relay);
  ASSERT_OK((*relay)->Start());

  auto client = HttpClient::ConnectTcp(*port);
  ASSERT_OK(client);
  HttpClient::Request head;
  head.method = "HEAD";
  auto h = client->Send(head);
  ASSERT_OK(h);
  EXPECT_EQ(h->status, 200);
  auto claude = client->Post("/v1/messages?beta=true", kClaudeBody, {"x-api-key: dummy"});
  ASSERT_OK(claude);
  EXPECT_EQ(ParseSse(claude->body).size(), 9u);
  auto codex = client->Post("/v1/responses", kCodexBody);
  ASSERT_OK(codex);
  EXPECT_EQ(ParseSse(codex->body).back().name, "response.completed");
  EXPECT_EQ((*api)->requests().size(), 3u);
  EXPECT_EQ((*api)->connections_accepted(), 1);

  // The bridge counts right after each delivery; give its counter that instant.
  auto deadline = Clock::now() + std::chrono::seconds(2);
  while ((*bridge)->stats().bytes_from_target < claude->body.size() + codex->body.size() &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  RelayStats s = (*bridge)->stats();
  EXPECT_EQ(s.connections_accepted, 1u);
  EXPECT_GT(s.bytes_to_target, std::strlen(kClaudeBody) + std::strlen(kCodexBody));
  EXPECT_GT(s.bytes_from_target, claude->body.size() + codex->body.size());
}

}  // namespace
}  // namespace codespace::lanes
