#include "harness/stub_model_api.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

namespace codespace::lanes {

namespace {

using Json = nlohmann::ordered_json;  // keys in the order the real APIs send them

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxBodyBytes = 64 * 1024 * 1024;

// Never throws: the stub's own strings are UTF-8, and a request's were validated by the parser.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The answer in word-sized pieces, as a model streams it ("stub", " says", " hi").
std::vector<std::string> Pieces(const std::string& answer) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 1; i <= answer.size(); ++i) {
    if (i == answer.size() || answer[i] == ' ') {
      out.push_back(answer.substr(start, i - start));
      start = i;
    }
  }
  if (out.empty()) out.push_back("");
  return out;
}

int TokenCount(const std::string& text) {
  return std::max(1, static_cast<int>(Pieces(text).size()));
}

void AppendEvent(std::string& out, const std::string& type, const Json& data) {
  out += "event: " + type + "\ndata: " + Dump(data) + "\n\n";
}

Json AnthropicUsage(int input, int output) {
  return Json{{"input_tokens", input},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", 0},
              {"output_tokens", output},
              {"service_tier", "standard"}};
}

Json OpenAiMessageItem(const std::string& id, const std::string& answer, bool done) {
  Json content = Json::array();
  if (done) {
    content.push_back(
        Json{{"type", "output_text"}, {"annotations", Json::array()}, {"text", answer}});
  }
  return Json{{"id", id},
              {"type", "message"},
              {"status", done ? "completed" : "in_progress"},
              {"content", content},
              {"role", "assistant"}};
}

Json OpenAiResponse(const std::string& answer, const std::string& model, uint64_t id, bool done) {
  std::string item_id = fmt::format("msg_stub_{}", id);
  Json output = Json::array();
  if (done) output.push_back(OpenAiMessageItem(item_id, answer, true));
  Json usage = nullptr;
  if (done) {
    int out_tokens = TokenCount(answer);
    usage = Json{{"input_tokens", 12},
                 {"input_tokens_details", {{"cached_tokens", 0}}},
                 {"output_tokens", out_tokens},
                 {"output_tokens_details", {{"reasoning_tokens", 0}}},
                 {"total_tokens", 12 + out_tokens}};
  }
  return Json{{"id", fmt::format("resp_stub_{}", id)},
              {"object", "response"},
              {"created_at", static_cast<int64_t>(::time(nullptr))},
              {"status", done ? "completed" : "in_progress"},
              {"background", false},
              {"error", nullptr},
              {"incomplete_details", nullptr},
              {"instructions", nullptr},
              {"max_output_tokens", nullptr},
              {"model", model},
              {"output", output},
              {"parallel_tool_calls", true},
              {"previous_response_id", nullptr},
              {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
              {"store", false},
              {"temperature", 1.0},
              {"text", {{"format", {{"type", "text"}}}}},
              {"tool_choice", "auto"},
              {"tools", Json::array()},
              {"top_p", 1.0},
              {"truncation", "disabled"},
              {"usage", usage},
              {"user", nullptr},
              {"metadata", Json::object()}};
}

}  // namespace

std::string AnthropicStreamEvents(const std::string& answer, const std::string& model,
                                  uint64_t id) {
  std::string out;
  Json start_message = {{"id", fmt::format("msg_stub_{}", id)},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"model", model},
                        {"content", Json::array()},
                        {"stop_reason", nullptr},
                        {"stop_sequence", nullptr},
                        {"usage", AnthropicUsage(12, 1)}};
  AppendEvent(out, "message_start", {{"type", "message_start"}, {"message", start_message}});
  AppendEvent(out, "content_block_start",
              {{"type", "content_block_start"},
               {"index", 0},
               {"content_block", {{"type", "text"}, {"text", ""}}}});
  AppendEvent(out, "ping", {{"type", "ping"}});
  for (const std::string& piece : Pieces(answer)) {
    AppendEvent(out, "content_block_delta",
                {{"type", "content_block_delta"},
                 {"index", 0},
                 {"delta", {{"type", "text_delta"}, {"text", piece}}}});
  }
  AppendEvent(out, "content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
  AppendEvent(out, "message_delta",
              {{"type", "message_delta"},
               {"delta", {{"stop_reason", "end_turn"}, {"stop_sequence", nullptr}}},
               {"usage", {{"output_tokens", TokenCount(answer)}}}});
  AppendEvent(out, "message_stop", {{"type", "message_stop"}});
  return out;
}

std::string AnthropicMessageJson(const std::string& answer, const std::string& model, uint64_t id) {
  return Dump(Json{{"id", fmt::format("msg_stub_{}", id)},
                   {"type", "message"},
                   {"role", "assistant"},
                   {"model", model},
                   {"content", Json::array({Json{{"type", "text"}, {"text", answer}}})},
                   {"stop_reason", "end_turn"},
                   {"stop_sequence", nullptr},
                   {"usage", AnthropicUsage(12, TokenCount(answer))}});
}

std::string OpenAiResponsesStreamEvents(const std::string& answer, const std::string& model,
                                        uint64_t id) {
  std::string out;
  int seq = 0;
  std::string item_id = fmt::format("msg_stub_{}", id);
  auto event = [&](const std::string& type, Json fields) {
    Json j = {{"type", type}, {"sequence_number", seq++}};
    for (auto& [k, v] : fields.items()) j[k] = v;
    AppendEvent(out, type, j);
  };
  Json text_part_empty = {{"type", "output_text"}, {"annotations", Json::array()}, {"text", ""}};
  Json text_part = {{"type", "output_text"}, {"annotations", Json::array()}, {"text", answer}};
  event("response.created", {{"response", OpenAiResponse(answer, model, id, false)}});
  event("response.in_progress", {{"response", OpenAiResponse(answer, model, id, false)}});
  event("response.output_item.added",
        {{"output_index", 0}, {"item", OpenAiMessageItem(item_id, answer, false)}});
  event(
      "response.content_part.added",
      {{"item_id", item_id}, {"output_index", 0}, {"content_index", 0}, {"part", text_part_empty}});
  for (const std::string& piece : Pieces(answer)) {
    event("response.output_text.delta", {{"item_id", item_id},
                                         {"output_index", 0},
                                         {"content_index", 0},
                                         {"delta", piece},
                                         {"logprobs", Json::array()}});
  }
  event("response.output_text.done", {{"item_id", item_id},
                                      {"output_index", 0},
                                      {"content_index", 0},
                                      {"text", answer},
                                      {"logprobs", Json::array()}});
  event("response.content_part.done",
        {{"item_id", item_id}, {"output_index", 0}, {"content_index", 0}, {"part", text_part}});
  event("response.output_item.done",
        {{"output_index", 0}, {"item", OpenAiMessageItem(item_id, answer, true)}});
  event("response.completed", {{"response", OpenAiResponse(answer, model, id, true)}});
  return out;
}

std::string OpenAiResponseJson(const std::string& answer, const std::string& model, uint64_t id) {
  return Dump(OpenAiResponse(answer, model, id, true));
}

std::vector<std::string> SplitSseEvents(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    if (end > pos) out.push_back(body.substr(pos, end - pos) + "\n");
    pos = end + 2;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The server.

namespace {

Status SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    // MSG_NOSIGNAL: a client that hung up is an error here, not a SIGPIPE for the test process.
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("send", errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

// Buffered reads from one connection.
class Reader {
 public:
  explicit Reader(int fd) : fd_(fd) {}
  // Appends more input; false on EOF or error.
  bool Fill() {
    char buf[16384];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data_.append(buf, static_cast<size_t>(n));
      return true;
    }
  }
  // A line ending in CRLF (returned without it); nullopt-like false when the connection ends.
  bool Line(std::string* line, size_t limit) {
    for (;;) {
      size_t end = data_.find("\r\n");
      if (end != std::string::npos) {
        *line = data_.substr(0, end);
        data_.erase(0, end + 2);
        return true;
      }
      if (data_.size() > limit || !Fill()) return false;
    }
  }
  bool Take(size_t n, std::string* out) {
    while (data_.size() < n) {
      if (!Fill()) return false;
    }
    out->append(data_, 0, n);
    data_.erase(0, n);
    return true;
  }
  bool empty() const { return data_.empty(); }

 private:
  int fd_;
  std::string data_;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool KeptHeader(const std::string& name) {
  static const char* kKept[] = {"host",           "user-agent",     "accept",
                                "content-type",   "content-length", "transfer-encoding",
                                "authorization",  "x-api-key",      "anthropic-version",
                                "anthropic-beta", "openai-beta",    "connection",
                                "expect"};
  for (const char* k : kKept) {
    if (name == k) return true;
  }
  return name.rfind("x-", 0) == 0;
}

std::string StatusText(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Status";
  }
}

std::string ErrorJson(const std::string& type, const std::string& message) {
  // Anthropic's error shape; OpenAI clients read error.message from it all the same.
  return Dump(Json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}});
}

}  // namespace

Result<std::unique_ptr<StubModelApi>> StubModelApi::StartUnix(const std::string& path,
                                                              StubModelApiOptions options) {
  sockaddr_un a{};
  if (path.empty() || path.size() >= sizeof(a.sun_path)) {
    return InvalidArgumentError(fmt::format("unix socket path too long: {}", path));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("socket(AF_UNIX)", errno);
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), path.size());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return ErrnoError(fmt::format("bind({})", path), errno);
  }
  if (::chmod(path.c_str(), 0666) != 0) return ErrnoError(fmt::format("chmod({})", path), errno);
  if (::listen(fd.get(), 128) != 0) return ErrnoError(fmt::format("listen({})", path), errno);
  ASSIGN_OR_RETURN(auto api, StartOn(std::move(fd), std::move(options)));
  api->socket_path_ = path;
  return api;
}

Result<std::unique_ptr<StubModelApi>> StubModelApi::StartTcp(uint16_t port,
                                                             StubModelApiOptions options) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("socket(AF_INET)", errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return ErrnoError(fmt::format("bind(127.0.0.1:{})", port), errno);
  }
  if (::listen(fd.get(), 128) != 0) return ErrnoError("listen(127.0.0.1)", errno);
  socklen_t len = sizeof(a);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return ErrnoError("getsockname", errno);
  }
  uint16_t bound = ntohs(a.sin_port);
  ASSIGN_OR_RETURN(auto api, StartOn(std::move(fd), std::move(options)));
  api->port_ = bound;
  return api;
}

Result<std::unique_ptr<StubModelApi>> StubModelApi::StartOn(UniqueFd listener,
                                                            StubModelApiOptions options) {
  std::unique_ptr<StubModelApi> api(new StubModelApi(std::move(options)));
  ASSIGN_OR_RETURN(api->server_,
                   relay_testing::TestBroker::Start(std::move(listener),
                                                    [p = api.get()](int fd) { p->Serve(fd); }));
  return api;
}

StubModelApi::~StubModelApi() { Stop(); }

void StubModelApi::Stop() {
  // Shuts every connection down — handlers blocked on an idle keep-alive connection (or writing
  // to a full one) wake — and joins every thread. Idempotent.
  if (server_) server_->Stop();
  if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
}

std::string StubModelApi::broker_address() const {
  if (!socket_path_.empty()) return "unix:" + socket_path_;
  return fmt::format("127.0.0.1:{}", port_);
}

std::vector<StubRequest> StubModelApi::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::vector<StubRequest> StubModelApi::RequestsTo(const std::string& path) const {
  std::vector<StubRequest> out;
  for (auto& r : requests()) {
    if (r.path == path) out.push_back(r);
  }
  return out;
}

void StubModelApi::ClearRequests() {
  std::lock_guard<std::mutex> lock(mu_);
  requests_.clear();
}

void StubModelApi::Record(const StubRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_.push_back(request);
}

void StubModelApi::Serve(int fd) {
  Reader in(fd);
  for (;;) {
    StubRequest request;
    std::string line;
    // Tolerate blank lines between requests (RFC 9112 2.2).
    do {
      if (!in.Line(&line, kMaxHeaderBytes)) return;
    } while (line.empty());
    size_t sp1 = line.find(' ');
    size_t sp2 = line.rfind(' ');
    if (sp1 == std::string::npos || sp2 == sp1) {
      SendAll(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
          .IgnoreError();
      return;
    }
    request.method = line.substr(0, sp1);
    request.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string version = line.substr(sp2 + 1);
    size_t q = request.target.find('?');
    request.path = request.target.substr(0, q);
    if (q != std::string::npos) request.query = request.target.substr(q + 1);

    size_t header_bytes = 0;
    std::map<std::string, std::string> all;
    for (;;) {
      if (!in.Line(&line, kMaxHeaderBytes)) return;
      if (line.empty()) break;
      header_bytes += line.size();
      if (header_bytes > kMaxHeaderBytes) {
        SendAll(fd,
                "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
                "Connection: close\r\n\r\n")
            .IgnoreError();
        return;
      }
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = Lower(Trim(line.substr(0, colon)));
      std::string value = Trim(line.substr(colon + 1));
      auto [it, fresh] = all.emplace(name, value);
      if (!fresh) it->second += ", " + value;
    }
    for (const auto& [name, value] : all) {
      if (KeptHeader(name)) request.headers[name] = value;
    }
    std::string connection = Lower(all.count("connection") ? all["connection"] : "");
    bool keep_alive = version == "HTTP/1.1" ? connection.find("close") == std::string::npos
                                            : connection.find("keep-alive") != std::string::npos;
    if (Lower(all.count("expect") ? all["expect"] : "") == "100-continue") {
      if (!SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n").ok()) return;
    }

    // The body: chunked wins over Content-Length (RFC 9112 6.3).
    std::string te = Lower(all.count("transfer-encoding") ? all["transfer-encoding"] : "");
    if (te.find("chunked") != std::string::npos) {
      for (;;) {
        if (!in.Line(&line, 1024)) return;
        size_t size = 0;
        std::string hex = line.substr(0, line.find(';'));
        if (hex.empty() || hex.size() > 8 || !std::all_of(hex.begin(), hex.end(), [](char c) {
              return std::isxdigit(static_cast<unsigned char>(c)) != 0;
            })) {
          SendAll(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
              .IgnoreError();
          return;
        }
        size = std::stoul(hex, nullptr, 16);
        if (size == 0) {
          do {  // trailers, up to the blank line
            if (!in.Line(&line, kMaxHeaderBytes)) return;
          } while (!line.empty());
          break;
        }
        if (request.body.size() + size > kMaxBodyBytes) return;
        std::string crlf;
        if (!in.Take(size, &request.body) || !in.Take(2, &crlf)) return;
      }
    } else if (all.count("content-length")) {
      const std::string& cl = all["content-length"];
      if (cl.empty() || cl.size() > 10 ||
          !std::all_of(cl.begin(), cl.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        SendAll(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .IgnoreError();
        return;
      }
      size_t length = std::stoul(cl);
      if (length > kMaxBodyBytes) {
        SendAll(fd,
                "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .IgnoreError();
        return;
      }
      if (!in.Take(length, &request.body)) return;
    }
    if (!Respond(fd, request, keep_alive)) return;
  }
}

bool StubModelApi::Respond(int fd, StubRequest& request, bool keep_alive) {
  uint64_t id = next_id_.fetch_add(1);
  auto send_plain = [&](int status, const std::string& content_type, const std::string& body,
                        const std::string& extra_headers) {
    request.status = status;
    Record(request);  // before the answer: a client that has it finds the request recorded
    std::string head = fmt::format(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: {}\r\n\r\n",
        status, StatusText(status), content_type, body.size(), extra_headers,
        keep_alive ? "keep-alive" : "close");
    if (request.method != "HEAD") head += body;
    return SendAll(fd, head).ok() && keep_alive;
  };
  auto send_json = [&](int status, const std::string& body) {
    return send_plain(
        status, "application/json", body,
        fmt::format("request-id: req_stub_{}\r\nx-request-id: req_stub_{}\r\n", id, id));
  };
  auto send_stream = [&](const std::string& events) {
    request.status = 200;
    Record(request);
    std::string head = fmt::format(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        "Cache-Control: no-cache\r\nrequest-id: req_stub_{}\r\nx-request-id: req_stub_{}\r\n"
        "Transfer-Encoding: chunked\r\nConnection: {}\r\n\r\n",
        id, id, keep_alive ? "keep-alive" : "close");
    if (!SendAll(fd, head).ok()) return false;
    for (const std::string& block : SplitSseEvents(events)) {
      if (options_.event_delay.count() > 0) std::this_thread::sleep_for(options_.event_delay);
      std::string event = block + "\n";
      if (!SendAll(fd, fmt::format("{:x}\r\n{}\r\n", event.size(), event)).ok()) return false;
    }
    return SendAll(fd, "0\r\n\r\n").ok() && keep_alive;
  };

  const std::string& path = request.path;
  const std::string& method = request.method;
  if (path == "/") {
    if (method == "HEAD" || method == "GET") {
      return send_plain(200, "text/plain; charset=utf-8", "stub model api\n", "");
    }
    return send_json(405, ErrorJson("invalid_request_error",
                                    fmt::format("stub model api: {} / is not allowed", method)));
  }
  bool messages = path == "/v1/messages";
  bool count_tokens = path == "/v1/messages/count_tokens";
  bool responses = path == "/v1/responses";
  if (!messages && !count_tokens && !responses) {
    return send_json(404,
                     ErrorJson("not_found_error",
                               fmt::format("stub model api: no route for {} {}", method, path)));
  }
  if (method != "POST") {
    return send_json(405, ErrorJson("invalid_request_error",
                                    fmt::format("stub model api: {} {} is not allowed; use POST",
                                                method, path)));
  }
  Json body = Json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return send_json(400, ErrorJson("invalid_request_error",
                                    "stub model api: the request body is not a JSON object"));
  }
  auto stream_it = body.find("stream");
  bool stream = stream_it != body.end() && stream_it->is_boolean() && stream_it->get<bool>();
  auto model_it = body.find("model");
  std::string model;
  if (model_it != body.end() && model_it->is_string()) model = model_it->get<std::string>();

  if (count_tokens) {
    int tokens = std::max(1, static_cast<int>(request.body.size() / 4));
    return send_json(200, Dump(Json{{"input_tokens", tokens}}));
  }
  if (messages) {
    if (model.empty()) model = options_.anthropic_model;
    if (stream) return send_stream(AnthropicStreamEvents(options_.answer, model, id));
    return send_json(200, AnthropicMessageJson(options_.answer, model, id));
  }
  if (model.empty()) model = options_.openai_model;
  if (stream) return send_stream(OpenAiResponsesStreamEvents(options_.answer, model, id));
  return send_json(200, OpenAiResponseJson(options_.answer, model, id));
}

}  // namespace codespace::lanes
