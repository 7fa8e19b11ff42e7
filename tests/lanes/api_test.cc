// The worker API (src/api), against the real binary: `codespace worker` in the background with
// its unix socket (and a TCP listener with a bearer token), talked to with the API's own small
// client. The contract test walks docs/openapi.json: every documented route is called, and every
// answer's status must be documented for it and its JSON must have the documented required
// fields.
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "api/api_client.h"
#include "base/file_util.h"
#include "lanes/lane_test_util.h"
#include "run/run_spec.h"
#include "supervisor/run_dir.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Json = nlohmann::json;

int FreeTcpPort() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// The value of one sample in Prometheus text, e.g.
// MetricValue(text, "codespace_run_setup_seconds_count{network=\"severed\"}"); -1 when absent.
double MetricValue(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

std::string SetupSeries(const std::string& name, const std::string& network,
                        const std::string& le = "") {
  return le.empty() ? fmt::format("codespace_run_setup_seconds_{}{{network=\"{}\"}}", name, network)
                    : fmt::format("codespace_run_setup_seconds_{}{{network=\"{}\",le=\"{}\"}}",
                                  name, network, le);
}

// Connects to a unix socket as `uid` (gid the same, no other groups) in a forked child:
// "connected", "denied" (EACCES/EPERM), or what else happened.
std::string ConnectAs(uid_t uid, const std::string& path) {
  auto p = MakePipe();
  if (!p.ok()) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    const char* word = "other";
    if (::setgroups(0, nullptr) == 0 && ::setresgid(uid, uid, uid) == 0 &&
        ::setresuid(uid, uid, uid) == 0) {
      int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
      if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
        word = "connected";
      } else if (errno == EACCES || errno == EPERM) {
        word = "denied";
      }
    } else {
      word = "could not drop privileges";
    }
    WriteAll(p->write.get(), word).IgnoreError();
    ::_exit(0);
  }
  p->write.reset();
  std::string out = ReadAll(p->read.get()).value_or("read failed");
  ::waitpid(pid, nullptr, 0);
  return out;
}

// One request that must be answered (any status); a failed exchange fails the test.
api::ClientResponse CallAnswered(const std::string& sock, std::string_view method,
                                 std::string_view target, std::string_view body = {}) {
  auto r = api::CallApi(sock, method, target, body);
  EXPECT_TRUE(r.ok()) << method << " " << target << ": " << r.status().ToString();
  return r.ok() ? *r : api::ClientResponse{};
}

// The answer's body as JSON; a body that is not JSON fails the test.
Json JsonOfAnswer(const api::ClientResponse& r) {
  auto j = Json::parse(r.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.body;
  return j;
}

// Starts `codespace worker` as `argv` with `env`, its output appended to <root>/worker.log, and
// waits (up to 30 s) for its API at `sock` to answer; nullptr, with the log, when it does not.
std::unique_ptr<ChildProcess> StartWorkerAndWait(const StagedInstall& install,
                                                 std::vector<std::string> argv,
                                                 std::vector<std::string> env,
                                                 const std::string& sock, std::string* failure) {
  auto log =
      OpenFile((install.root() + "/worker.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (!log.ok()) {
    *failure = log.status().ToString();
    return nullptr;
  }
  SpawnOptions o;
  o.argv = std::move(argv);
  o.env = std::move(env);
  o.fds = {{log->get(), 1}, {log->get(), 2}};  // NOLINT
  auto child = Spawn(o);
  if (!child.ok()) {
    *failure = child.status().ToString();
    return nullptr;
  }
  auto worker = std::make_unique<ChildProcess>(std::move(*child));
  auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until) {
    auto r = api::CallApi(sock, "GET", "/v1/posture");
    if (r.ok() && r->status == 200) return worker;
    std::this_thread::sleep_for(50ms);
  }
  *failure = "the worker API did not answer; worker log:\n" +
             ReadFileToString(install.root() + "/worker.log").value_or("");
  return nullptr;
}

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
    token_file_ = install_.root() + "/token";
    ASSERT_TRUE(WriteFileAtomically(token_file_, token_ + "\n", 0600).ok());
    tcp_port_ = FreeTcpPort();
    StartWorker();
  }
  void TearDown() override {
    if (worker_) {
      worker_->Signal(SIGTERM).IgnoreError();
      worker_->Wait().status().IgnoreError();
      worker_.reset();
    }
    // A run a test left starting (a POST /v1/runs it did not wait for) ends by itself; what is
    // still running then is killed.
    install_.WaitForSupervisors(std::chrono::seconds(5));
    KillProcessesMatching(install_.state_dir());
  }
  std::vector<std::string> Env() {
    return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "CODESPACE_STATE_DIR=" + install_.state_dir(),
            "CODESPACE_STOP_GRACE_MS=1000",
            "CODESPACE_DRAIN_GRACE_MS=1000",
            "CODESPACE_API_GROUP=nogroup",
            fmt::format("CODESPACE_API_LISTEN=127.0.0.1:{}", tcp_port_),
            "CODESPACE_API_TOKEN_FILE=" + token_file_};
  }
  std::vector<std::string> FullEnv() {
    std::vector<std::string> env = Env();
    for (const auto& e : extra_env_) {
      // Later entries win: drop an earlier one with the same name.
      std::string key = e.substr(0, e.find('='));
      std::erase_if(env, [&](const std::string& x) { return x.rfind(key + "=", 0) == 0; });
      env.push_back(e);
    }
    return env;
  }
  std::vector<std::string> extra_env_;
  void StartWorker() {
    std::string failure;
    worker_ =
        StartWorkerAndWait(install_, {install_.codespace(), "worker"}, FullEnv(), sock(), &failure);
    ASSERT_TRUE(worker_) << failure;
  }
  std::string sock() const {
    for (const auto& e : extra_env_) {
      if (e.rfind("CODESPACE_API_SOCKET=", 0) == 0) return "unix:" + e.substr(21);
    }
    return "unix:" + install_.state_dir() + "/api.sock";
  }
  std::string tcp() const { return fmt::format("127.0.0.1:{}", tcp_port_); }
  std::string SpecJson(const std::vector<std::string>& argv, Json extra = Json::object()) {
    Json j = {{"argv", argv}, {"workspace", install_.workspace()}, {"egress", {{"mode", "none"}}}};
    for (auto& [k, v] : extra.items()) j[k] = v;
    return j.dump();
  }
  api::ClientResponse Call(std::string_view method, std::string_view target,
                           std::string_view body = {}) {
    return CallAnswered(sock(), method, target, body);
  }
  Json JsonOf(const api::ClientResponse& r) { return JsonOfAnswer(r); }
  std::string Submit(const std::vector<std::string>& argv) {
    auto r = Call("POST", "/v1/runs", SpecJson(argv));
    EXPECT_EQ(r.status, 201) << r.body;
    return JsonOf(r).value("id", "");
  }
  Json WaitEnded(const std::string& id, std::chrono::seconds limit = 30s) {
    auto until = std::chrono::steady_clock::now() + limit;
    Json j;
    while (std::chrono::steady_clock::now() < until) {
      j = JsonOf(Call("GET", "/v1/runs/" + id));
      std::string s = j.value("state", "");
      if (s != "queued" && s != "running") return j;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "run " << id << " did not end: " << j.dump();
    return j;
  }
  size_t CountRuns() { return JsonOf(Call("GET", "/v1/runs?limit=1000"))["runs"].size(); }

  StagedInstall install_{0};
  std::unique_ptr<ChildProcess> worker_;
  std::string token_ = "s3cret-token-0123456789abcdef";
  std::string token_file_;
  int tcp_port_ = 0;
};

// --- The OpenAPI walk ------------------------------------------------------------------------

class OpenApi {
 public:
  OpenApi() {
    std::ifstream f(CODESPACE_OPENAPI_PATH);
    std::stringstream ss;
    ss << f.rdbuf();
    doc_ = Json::parse(ss.str(), nullptr, false);
  }
  bool ok() const { return !doc_.is_discarded() && doc_.contains("paths"); }
  std::set<std::string> Operations() const {
    std::set<std::string> ops;
    for (auto& [path, item] : doc_["paths"].items()) {
      for (auto& [method, op] : item.items()) ops.insert(Upper(method) + " " + path);
    }
    return ops;
  }
  // Checks one answer against the operation's documented responses; "" when it conforms.
  std::string Check(const std::string& method, const std::string& path,
                    const api::ClientResponse& r) const {
    std::string m = method;
    for (char& c : m) c = static_cast<char>(std::tolower(c));
    if (!doc_["paths"].contains(path) || !doc_["paths"][path].contains(m)) {
      return "undocumented operation " + method + " " + path;
    }
    const Json& responses = doc_["paths"][path][m]["responses"];
    std::string code = std::to_string(r.status);
    if (!responses.contains(code)) return "undocumented status " + code + ": " + r.body;
    const Json& resp = responses[code];
    if (!resp.contains("content")) return "";
    std::string ctype = r.headers.count("content-type") ? r.headers.at("content-type") : "";
    if (!resp["content"].contains("application/json")) {
      if (!resp["content"].contains(ctype)) return "undocumented content type " + ctype;
      return "";
    }
    if (ctype != "application/json") return "content type " + ctype + " is not JSON";
    Json body = Json::parse(r.body, nullptr, false);
    if (body.is_discarded()) return "body is not JSON: " + r.body;
    return Conforms(resp["content"]["application/json"]["schema"], body, "$");
  }

 private:
  static std::string Upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(c));
    return s;
  }
  const Json& Resolve(const Json& schema) const {
    if (!schema.contains("$ref")) return schema;
    std::string ref = schema["$ref"];  // "#/components/schemas/X"
    return doc_["components"]["schemas"][ref.substr(ref.rfind('/') + 1)];
  }
  std::string Conforms(const Json& raw, const Json& value, const std::string& at) const {
    const Json& schema = Resolve(raw);
    if (schema.contains("required")) {
      if (!value.is_object()) return at + ": expected an object";
      for (const auto& f : schema["required"]) {
        if (!value.contains(f.get<std::string>())) return at + ": missing " + f.get<std::string>();
      }
    }
    if (schema.contains("enum") && !schema["enum"].empty() &&
        std::find(schema["enum"].begin(), schema["enum"].end(), value) == schema["enum"].end()) {
      return at + ": " + value.dump() + " not in enum";
    }
    if (schema.contains("properties") && value.is_object()) {
      for (auto& [k, sub] : schema["properties"].items()) {
        if (value.contains(k)) {
          std::string e = Conforms(sub, value[k], at + "." + k);
          if (!e.empty()) return e;
        }
      }
    }
    if (schema.contains("items") && value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        std::string e = Conforms(schema["items"], value[i], fmt::format("{}[{}]", at, i));
        if (!e.empty()) return e;
      }
    }
    return "";
  }
  Json doc_;
};

TEST_F(ApiTest, EveryDocumentedRouteAnswersAsDocumented) {
  OpenApi doc;
  ASSERT_TRUE(doc.ok()) << CODESPACE_OPENAPI_PATH;
  std::string queued = Submit({"/bin/sh", "-c", "echo out; echo err >&2"});
  std::string sleeper = Submit({"/bin/sleep", "30"});
  ASSERT_FALSE(queued.empty());
  WaitEnded(queued);
  struct Case {
    std::string method, path, target, body;
    int status;
  };
  const std::string good = SpecJson({"true"});
  const std::vector<Case> cases = {
      {"GET", "/v1/posture", "/v1/posture", "", 200},
      {"POST", "/v1/admission", "/v1/admission", good, 200},
      {"POST", "/v1/admission", "/v1/admission", "{", 400},
      {"POST", "/v1/runs", "/v1/runs", good, 201},
      {"POST", "/v1/runs", "/v1/runs", SpecJson({"true"}, {{"timeuot", 1}}), 400},
      {"GET", "/v1/runs", "/v1/runs", "", 200},
      {"GET", "/v1/runs", "/v1/runs?state=exited&limit=2&offset=0", "", 200},
      {"GET", "/v1/runs", "/v1/runs?state=bogus", "", 400},
      {"GET", "/v1/runs", "/v1/runs?limit=0", "", 400},
      {"GET", "/v1/runs/{id}", "/v1/runs/" + queued, "", 200},
      {"GET", "/v1/runs/{id}", "/v1/runs/0123456789abcdef", "", 404},
      {"GET", "/v1/runs/{id}/logs", "/v1/runs/" + queued + "/logs?follow=false", "", 200},
      {"GET", "/v1/runs/{id}/logs", "/v1/runs/" + queued + "/logs?stream=stdout", "", 200},
      {"GET", "/v1/runs/{id}/logs", "/v1/runs/" + queued + "/logs?stream=x", "", 400},
      {"GET", "/v1/runs/{id}/logs", "/v1/runs/0123456789abcdef/logs", "", 404},
      {"POST", "/v1/runs/{id}/cancel", "/v1/runs/" + sleeper + "/cancel", "", 202},
      {"POST", "/v1/runs/{id}/cancel", "/v1/runs/" + queued + "/cancel", "", 409},
      {"POST", "/v1/runs/{id}/cancel", "/v1/runs/0123456789abcdef/cancel", "", 404},
      {"GET", "/metrics", "/metrics", "", 200},
  };
  std::set<std::string> walked;
  for (const Case& c : cases) {
    auto r = Call(c.method, c.target, c.body);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.target << ": " << r.body;
    EXPECT_EQ(doc.Check(c.method, c.path, r), "") << c.method << " " << c.target;
    walked.insert(c.method + " " + c.path);
  }
  EXPECT_EQ(walked, doc.Operations()) << "every documented operation is walked";

  // The documented Idempotency-Key: a first submit 201, the same key again 200 with the same
  // run (nothing new), the same key with another spec 409, a malformed key 400; all as
  // documented.
  const std::string key = "api-lane-" + queued;
  auto with_key = [&](std::string_view target, const std::string& body, const std::string& k) {
    auto r = api::CallApi(sock(), "POST", target, body, {{"Idempotency-Key", k}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : api::ClientResponse{};
  };
  auto first = with_key("/v1/runs?name=keyed", good, key);
  EXPECT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(doc.Check("POST", "/v1/runs", first), "");
  auto again = with_key("/v1/runs?name=keyed", good, key);
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(doc.Check("POST", "/v1/runs", again), "");
  EXPECT_EQ(JsonOf(again)["id"], JsonOf(first)["id"]);
  EXPECT_EQ(JsonOf(first)["idempotency_key"], key);
  EXPECT_EQ(JsonOf(first)["name"], "keyed");
  auto other = with_key("/v1/runs", SpecJson({"false"}), key);
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_EQ(doc.Check("POST", "/v1/runs", other), "");
  EXPECT_EQ(with_key("/v1/runs", good, "has space").status, 400);
  EXPECT_EQ(Call("POST", "/v1/runs?name=latest", good).status, 400);
  WaitEnded(JsonOf(first)["id"]);

  // What the answers say, beyond their shape.
  auto logs = Call("GET", "/v1/runs/" + queued + "/logs?follow=false");
  std::string out, err;
  api::LogFrameDecoder dec;
  EXPECT_TRUE(dec.Feed(logs.body, [&](std::string_view tag, std::string_view data) {
    (tag == "stdout" ? out : err).append(data);
  }));
  EXPECT_EQ(out, "out\n");
  EXPECT_EQ(err, "err\n");
  EXPECT_EQ(Call("GET", "/v1/runs/" + queued + "/logs?stream=stderr").body, "err\n");
  auto admission = JsonOf(Call("POST", "/v1/admission", good));
  EXPECT_TRUE(admission["admitted"].get<bool>()) << admission.dump();
  EXPECT_EQ(admission["plan"], "severed");
  auto metrics = Call("GET", "/metrics");
  EXPECT_THAT(metrics.body, HasSubstr("codespace_runs{state=\"exited\"}"));
  EXPECT_THAT(metrics.body, HasSubstr("codespace_run_setup_seconds_count{network=\"severed\"}"));
  EXPECT_THAT(metrics.body, HasSubstr("codespace_dropped_packets_total 0"));
  auto cancelled = WaitEnded(sleeper);
  EXPECT_EQ(cancelled["state"], "cancelled") << cancelled.dump();
  EXPECT_EQ(Call("DELETE", "/v1/runs").status, 405);
  EXPECT_EQ(Call("GET", "/nope").status, 404);
}

// A real run through the worker: its supervisor measures setup (launch to the sandbox's
// "started"), the record carries it, and /metrics counts it under the run's network posture.
TEST_F(ApiTest, ARunsSetupTimeReachesItsRecordAndTheHistogram) {
  std::string before = Call("GET", "/metrics").body;
  const double count0 = MetricValue(before, SetupSeries("count", "severed"));
  const double sum0 = MetricValue(before, SetupSeries("sum", "severed"));
  ASSERT_GE(count0, 0) << before;
  ASSERT_GE(sum0, 0) << before;
  std::string id = Submit({"true"});
  ASSERT_FALSE(id.empty());
  Json rec = WaitEnded(id);
  ASSERT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_EQ(rec["network"], "severed");
  ASSERT_TRUE(rec.contains("setup_ms") && rec["setup_ms"].is_number_integer()) << rec.dump();
  const int64_t setup_ms = rec["setup_ms"];
  // bubblewrap and its namespaces take milliseconds at least; and setup is part of the run's
  // life, which began at the claim (started_ms), before its supervisor was even spawned.
  EXPECT_GT(setup_ms, 0) << rec.dump();
  EXPECT_LE(setup_ms, rec["ended_ms"].get<int64_t>() - rec["started_ms"].get<int64_t>())
      << rec.dump();

  std::string after = Call("GET", "/metrics").body;
  EXPECT_EQ(MetricValue(after, SetupSeries("count", "severed")), count0 + 1) << after;
  const double sum1 = MetricValue(after, SetupSeries("sum", "severed"));
  EXPECT_GT(sum1, sum0) << after;
  EXPECT_NEAR(sum1 - sum0, static_cast<double>(setup_ms) / 1000.0, 1e-6) << after;
  EXPECT_EQ(MetricValue(after, SetupSeries("bucket", "severed", "+Inf")), count0 + 1) << after;
  // Only the run's own posture moved.
  EXPECT_EQ(MetricValue(after, SetupSeries("count", "filtered")), 0) << after;
  EXPECT_EQ(MetricValue(after, SetupSeries("count", "shared")), 0) << after;
}

TEST_F(ApiTest, BadInputIsRefusedNamingTheFieldAndMakesNoRun) {
  TempDir dir;
  std::string link = dir.path() + "/link";
  ASSERT_EQ(::symlink(install_.workspace().c_str(), link.c_str()), 0);
  std::string file = dir.path() + "/file";
  ASSERT_TRUE(WriteFileAtomically(file, "x", 0644).ok());
  auto spec = [&](const std::string& ws, Json extra = Json::object()) {
    Json j = {{"argv", {"true"}}, {"workspace", ws}, {"egress", {{"mode", "none"}}}};
    for (auto& [k, v] : extra.items()) j[k] = v;
    return j.dump();
  };
  struct Case {
    std::string body;
    int status;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"not json", 400, ""},
      {R"({"argv": 1})", 400, "argv"},
      {spec(install_.workspace(), {{"timeuot", 5}}), 400, "timeuot"},
      {spec(install_.workspace(), {{"timeout_seconds", "5"}}), 400, "timeout_seconds"},
      {spec(install_.workspace(),
            {{"egress", {{"mode", "allowlist"}, {"allowlist", {"ok.test", "exa mple.com"}}}}}),
       400, "egress.allowlist[1]"},
      {spec("relative/ws"), 400, "workspace"},
      {spec(install_.workspace() + "/../workspace"), 400, "workspace"},
      {spec(link), 400, "workspace"},
      {spec(file), 400, "workspace"},
      {spec(install_.workspace(), {{"broker", {{"address", "unix:" + file}}}}), 400,
       "broker.address"},
      {spec(install_.workspace(), {{"broker", {{"address", "10.0.0.1:80"}}}}), 400,
       "broker.address"},
      {std::string(1024 * 1024 + 10, ' '), 413, ""},
  };
  size_t before = CountRuns();
  for (const std::string route : {"/v1/runs", "/v1/admission"}) {
    for (const Case& c : cases) {
      auto r = Call("POST", route, c.body);
      EXPECT_EQ(r.status, c.status) << route << " " << c.body.substr(0, 200) << ": " << r.body;
      Json j = JsonOf(r);
      EXPECT_TRUE(j.contains("error")) << r.body;
      if (!c.field.empty()) {
        EXPECT_EQ(j.value("field", ""), c.field) << r.body;
      }
    }
  }
  auto wrong_type = api::CallApi(sock(), "POST", "/v1/runs", SpecJson({"true"}),
                                 {{"Content-Type", "text/plain"}});
  ASSERT_TRUE(wrong_type.ok());
  EXPECT_EQ(wrong_type->status, 415) << wrong_type->body;
  EXPECT_EQ(CountRuns(), before) << "no bad request made a run";
  // Raw garbage on the socket: an error answer, and the worker keeps serving.
  for (std::string garbage : {std::string("\x01\x02\r\n\r\n"),
                              std::string("GET / HTTP/9.9\r\n\r\n"), std::string(40000, 'A')}) {
    auto fd = api::ConnectTo(sock());
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE(WriteAll(fd->get(), garbage).ok());
    ::shutdown(fd->get(), SHUT_WR);
    auto answer = ReadAll(fd->get());
    ASSERT_TRUE(answer.ok());
    EXPECT_TRUE(answer->rfind("HTTP/1.1 4", 0) == 0 || answer->rfind("HTTP/1.1 505", 0) == 0)
        << garbage.substr(0, 40) << " → " << *answer;
  }
  EXPECT_EQ(Call("GET", "/v1/posture").status, 200);
}

TEST_F(ApiTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  auto fd = api::ConnectTo(sock());
  ASSERT_TRUE(fd.ok());
  for (int i = 0; i < 5; ++i) {
    auto r = api::CallApiOn(fd->get(), "GET", "/v1/posture", "", {}, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
  }
}

TEST_F(ApiTest, LogsFollowUntilTheRunEndsAndTheLogsAreSealed) {
  std::string id = Submit({"/bin/sh", "-c", "echo hello; sleep 1; echo bye >&2; echo end"});
  std::string out, err;
  api::LogFrameDecoder dec;
  auto r =
      api::CallApi(sock(), "GET", "/v1/runs/" + id + "/logs", "", {}, [&](std::string_view data) {
        return dec.Feed(data, [&](std::string_view tag, std::string_view d) {
          (tag == "stdout" ? out : err).append(d);
        });
      });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["content-type"], "application/vnd.codespace.log-frames");
  EXPECT_EQ(out, "hello\nend\n");
  EXPECT_EQ(err, "bye\n");
  Json rec = JsonOf(Call("GET", "/v1/runs/" + id));
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_TRUE(rec["logs"]["stdout"]["sealed"].get<bool>());
}

TEST_F(ApiTest, TcpNeedsTheBearerTokenAndTheSocketIsGroupOnly) {
  auto missing = api::CallApi(tcp(), "GET", "/v1/posture");
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_EQ(missing->status, 401);
  EXPECT_THAT(missing->body, HasSubstr("Authorization"));
  auto wrong =
      api::CallApi(tcp(), "GET", "/v1/posture", "", {{"Authorization", "Bearer " + token_ + "x"}});
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 401);
  auto prefix = api::CallApi(tcp(), "GET", "/v1/posture", "",
                             {{"Authorization", "Bearer " + token_.substr(0, 10)}});
  ASSERT_TRUE(prefix.ok());
  EXPECT_EQ(prefix->status, 401);
  auto basic = api::CallApi(tcp(), "GET", "/v1/posture", "", {{"Authorization", "Basic eDp5"}});
  ASSERT_TRUE(basic.ok());
  EXPECT_EQ(basic->status, 401);
  auto right =
      api::CallApi(tcp(), "GET", "/v1/posture", "", {{"Authorization", "Bearer " + token_}});
  ASSERT_TRUE(right.ok());
  EXPECT_EQ(right->status, 200) << right->body;

  struct stat st {};
  ASSERT_EQ(::stat((install_.state_dir() + "/api.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  struct group* g = ::getgrnam("nogroup");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(st.st_gid, g->gr_gid);
  // Another uid, not in the group, cannot connect (the socket's mode, not a token, decides).
  EXPECT_EQ(ConnectAs(kUnprivilegedUid, install_.state_dir() + "/api.sock"), "denied");
}

// CODESPACE_API_SOCKET outside the (0700) state dir: a member of CODESPACE_API_GROUP reaches
// the worker through the 0750 directory made around it; the group's members only.
TEST_F(ApiTest, ASocketForAGroupIsReachableByThatGroup) {
  if (worker_) {
    worker_->Signal(SIGTERM).IgnoreError();
    worker_->Wait().status().IgnoreError();
    worker_.reset();
  }
  std::string sock = install_.root() + "/api-dir/api.sock";
  extra_env_ = {"CODESPACE_API_SOCKET=" + sock,
                fmt::format("CODESPACE_API_GROUP={}", kUnprivilegedUid)};
  StartWorker();
  struct stat st {};
  ASSERT_EQ(::stat((install_.root() + "/api-dir").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  EXPECT_EQ(st.st_gid, kUnprivilegedUid);
  EXPECT_EQ(ConnectAs(kUnprivilegedUid, sock), "connected");
  EXPECT_EQ(ConnectAs(kUnprivilegedUid + 1, sock), "denied");
}

// A root worker's run is a leased uid (docs/identity.md): neither the worker's API socket nor
// its token file opens for it, though both are in its view (--fs host). Controls: root, outside
// any sandbox, reaches both with the same probe.
TEST_F(ApiTest, ARunReachesNeitherTheApiSocketNorTheTokenFile) {
  if (worker_) {
    worker_->Signal(SIGTERM).IgnoreError();
    worker_->Wait().status().IgnoreError();
    worker_.reset();
  }
  std::string sock = install_.root() + "/api-dir/api.sock";
  extra_env_ = {"CODESPACE_API_SOCKET=" + sock};
  StartWorker();
  for (const auto& [action, target, control] :
       {std::tuple<std::string, std::string, int>{"no-unix-connect", sock, 24},
        {"read", token_file_, 30}}) {
    auto outside = RunCommand({install_.probe(), action, target});
    ASSERT_TRUE(outside.ok());
    EXPECT_EQ(outside->status.ShellCode(), control) << "control: " << outside->output;
    std::string id = Submit({install_.probe(), action, target});
    ASSERT_FALSE(id.empty());
    Json rec = WaitEnded(id);
    EXPECT_EQ(rec["exit_code"], 0) << action << " " << target << ": " << rec.dump();
    EXPECT_TRUE(rec["host_uid"].is_number()) << rec.dump();
  }
}

// The worker looks at the store only every CODESPACE_WORKER_POLL_MS; a run submitted through
// the API wakes it instead. With the poll ten minutes apart, the run still starts and ends now.
TEST_F(ApiTest, ASubmittedRunStartsAtOnceNotAtTheNextPoll) {
  TearDown();
  extra_env_ = {"CODESPACE_WORKER_POLL_MS=600000"};
  StartWorker();
  for (int i = 0; i < 3; ++i) {  // and again: each wake is consumed, none is lost
    std::string id = Submit({"true"});
    ASSERT_FALSE(id.empty());
    Json rec = WaitEnded(id, 20s);
    EXPECT_EQ(rec["state"], "exited") << rec.dump();
  }
  // A stop is not left waiting for the next poll either, whichever thread the signal lands on.
  ASSERT_TRUE(worker_->Signal(SIGTERM).ok());
  auto ended = worker_->WaitFor(20s);
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_TRUE(ended->has_value()) << "the worker did not stop on SIGTERM";
  if (!ended->has_value()) worker_->Signal(SIGKILL).IgnoreError();
}

TEST_F(ApiTest, TcpWithoutATokenRefusesToStart) {
  TearDown();  // this test starts workers of its own
  CliResult r =
      RunCodespace(install_, {"-q", "worker"},
                   {{"CODESPACE_API_LISTEN", fmt::format("127.0.0.1:{}", FreeTcpPort())}});
  EXPECT_NE(r.code(), 0);
  EXPECT_THAT(r.output, HasSubstr("CODESPACE_API_TOKEN_FILE")) << r.output;
}

TEST_F(ApiTest, HundredConcurrentSubmitsAreEachRecordedOnce) {
  constexpr int kClients = 100;
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::string> ids;
  std::vector<std::string> failures;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      Json j = {{"argv", {"true"}},
                {"env", {fmt::format("SUBMIT_MARK={}", i)}},
                {"workspace", install_.workspace()},
                {"egress", {{"mode", "none"}}}};
      auto r = api::CallApi(sock(), "POST", "/v1/runs", j.dump());
      std::lock_guard<std::mutex> lock(mu);
      if (!r.ok() || r->status != 201) {
        failures.push_back(r.ok() ? r->body : r.status().ToString());
        return;
      }
      ids.push_back(Json::parse(r->body)["id"]);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures.front();
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), size_t{kClients});
  Json all = JsonOf(Call("GET", "/v1/runs?limit=1000"));
  std::map<std::string, int> marks;
  for (const auto& rec : all["runs"]) {
    for (const auto& e : rec["spec"]["env"]) marks[e.get<std::string>()]++;
  }
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(marks[fmt::format("SUBMIT_MARK={}", i)], 1) << i;
  }
}

TEST_F(ApiTest, AClientThatDisconnectsMidStreamHarmsNothing) {
  std::string id =
      Submit({"/bin/sh", "-c", "for i in $(seq 30); do echo line $i; sleep 0.05; done"});
  for (int i = 0; i < 20; ++i) {
    auto fd = api::ConnectTo(sock());
    ASSERT_TRUE(fd.ok());
    std::string req = "GET /v1/runs/" + id + "/logs HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_TRUE(WriteAll(fd->get(), req).ok());
    char buf[64];
    (void)::recv(fd->get(), buf, sizeof(buf), 0);
    if (i % 2 == 0) {
      linger l{1, 0};  // a reset rather than a clean close
      ::setsockopt(fd->get(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
  }
  Json rec = WaitEnded(id);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_EQ(Call("GET", "/v1/posture").status, 200);
  auto logs = Call("GET", "/v1/runs/" + id + "/logs?stream=stdout");
  EXPECT_THAT(logs.body, HasSubstr("line 30\n"));
  EXPECT_EQ(worker_->pid() > 0 && ::kill(worker_->pid(), 0) == 0, true) << "worker alive";
}

TEST_F(ApiTest, CliCommandsGoThroughTheWorkersSocket) {
  // A CLI environment that could not launch anything itself (no bubblewrap, confinement
  // required): what works here went through the worker.
  std::map<std::string, std::string> env = {{"CODESPACE_BWRAP_PATH", "/nonexistent/bwrap"},
                                            {"CODESPACE_REQUIRE_CONFINEMENT", "1"}};
  CliResult posture = RunCodespace(install_, {"posture"}, env);
  EXPECT_EQ(posture.code(), 0) << Describe(posture);
  EXPECT_THAT(posture.output, HasSubstr("confines=yes")) << "the worker's posture";
  CliResult plan = RunCodespace(install_, {"-q", "plan"}, env);
  EXPECT_EQ(plan.code(), 0) << Describe(plan);
  EXPECT_THAT(plan.output, HasSubstr("plan: severed"));
  CliResult submit = RunCodespace(install_,
                                  {"-q", "submit", "--workspace", install_.workspace(), "--",
                                   "/bin/sh", "-c", "echo via-api; echo err >&2"},
                                  env);
  ASSERT_EQ(submit.code(), 0) << Describe(submit);
  std::string id = submit.output.substr(0, submit.output.find('\n'));
  ASSERT_TRUE(IsValidRunId(id)) << submit.output;
  CliResult logs = RunCodespace(install_, {"logs", "--follow", id}, env);
  EXPECT_EQ(logs.code(), 0) << Describe(logs);
  EXPECT_THAT(logs.output, HasSubstr("via-api\n"));
  EXPECT_THAT(logs.output, HasSubstr("err\n"));
  CliResult show = RunCodespace(install_, {"show", id, "--json"}, env);
  EXPECT_THAT(show.output, HasSubstr("\"state\": \"exited\"")) << show.output;
  CliResult runs = RunCodespace(install_, {"runs", "--state", "exited"}, env);
  EXPECT_THAT(runs.output, HasSubstr(id));
  CliResult cancel = RunCodespace(install_, {"cancel", id}, env);
  EXPECT_NE(cancel.code(), 0) << "already over: " << Describe(cancel);
  EXPECT_THAT(cancel.output, HasSubstr("already exited"));
}

// A worker on a host that can neither confine nor filter — the unconfined lane's staging: uid
// 1654, CODESPACE_BWRAP_PATH at no binary, a PATH without ip and nft. Admission refuses every run
// but an open one (SPEC's plan table, last row): POST /v1/runs answers 422 with the reason, the
// refusal is recorded as a refused run (SPEC: refused is one of a record's states), and nothing
// is queued, started or run.
class ApiOnRefusingHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
    const std::string uid = std::to_string(kUnprivilegedUid);
    std::string failure;
    worker_ = StartWorkerAndWait(
        install_,
        {"/usr/bin/setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups",
         "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", install_.codespace(),
         "worker"},
        {"PATH=/nonexistent", "HOME=" + install_.root(),
         "CODESPACE_STATE_DIR=" + install_.state_dir(), "CODESPACE_BWRAP_PATH=/nonexistent/bwrap"},
        sock(), &failure);
    ASSERT_TRUE(worker_) << failure;
  }
  void TearDown() override {
    if (worker_) {
      worker_->Signal(SIGTERM).IgnoreError();
      worker_->Wait().status().IgnoreError();
      worker_.reset();
    }
    // A run a test left starting (a POST /v1/runs it did not wait for) ends by itself; what is
    // still running then is killed.
    install_.WaitForSupervisors(std::chrono::seconds(5));
    KillProcessesMatching(install_.state_dir());
  }
  std::string sock() const { return "unix:" + install_.state_dir() + "/api.sock"; }
  api::ClientResponse Call(std::string_view method, std::string_view target,
                           std::string_view body = {}) {
    return CallAnswered(sock(), method, target, body);
  }
  Json JsonOf(const api::ClientResponse& r) { return JsonOfAnswer(r); }
  std::string Created() const { return install_.workspace() + "/command-ran"; }

  StagedInstall install_{kUnprivilegedUid};
  std::unique_ptr<ChildProcess> worker_;
};

TEST_F(ApiOnRefusingHostTest, SubmitIs422WithTheReasonAndNothingRunnableIsRecorded) {
  OpenApi doc;
  ASSERT_TRUE(doc.ok()) << CODESPACE_OPENAPI_PATH;
  Json posture = JsonOf(Call("GET", "/v1/posture"));
  ASSERT_EQ(posture["confines"], false) << posture.dump();
  ASSERT_EQ(posture["tools"], false) << posture.dump();

  std::vector<std::string> refused;
  for (Json egress :
       {Json{{"mode", "allowlist"}, {"allowlist", {"127.0.0.1"}}}, Json{{"mode", "none"}}}) {
    Json spec = {{"argv", {"/bin/touch", Created()}},
                 {"workspace", install_.workspace()},
                 {"egress", egress}};
    auto r = Call("POST", "/v1/runs", spec.dump());
    ASSERT_EQ(r.status, 422) << egress.dump() << ": " << r.body;
    EXPECT_EQ(doc.Check("POST", "/v1/runs", r), "") << r.body;
    Json j = JsonOf(r);
    EXPECT_THAT(j.value("error", ""), HasSubstr("not found on PATH")) << r.body;
    const Json& rec = j["record"];
    EXPECT_EQ(rec["state"], "refused") << r.body;
    EXPECT_EQ(rec["plan"], "refused") << r.body;
    EXPECT_EQ(rec["reason"], j["error"]) << r.body;
    EXPECT_TRUE(rec["setup_ms"].is_null()) << r.body;
    EXPECT_EQ(rec["started_ms"], 0) << r.body;
    EXPECT_FALSE(r.headers.count("location")) << "a refusal points at no queued run";
    refused.push_back(rec.value("id", ""));
  }

  // Several worker rounds later (it polls every 100 ms): the refusals are kept as they were, no
  // run was queued or started, no supervisor got a run directory, and the command never ran.
  std::this_thread::sleep_for(1s);
  for (const std::string& id : refused) {
    ASSERT_TRUE(IsValidRunId(id)) << id;
    Json rec = JsonOf(Call("GET", "/v1/runs/" + id));
    EXPECT_EQ(rec["state"], "refused") << rec.dump();
    EXPECT_THAT(rec.value("reason", ""), HasSubstr("not found on PATH")) << rec.dump();
    EXPECT_EQ(rec["started_ms"], 0) << rec.dump();
    EXPECT_NE(::access(RunDirFor(install_.state_dir(), id).path.c_str(), F_OK), 0)
        << "run " << id << " has a run directory: a supervisor was started";
  }
  for (const char* state : {"queued", "running", "exited", "aborted"}) {
    EXPECT_TRUE(JsonOf(Call("GET", std::string("/v1/runs?state=") + state))["runs"].empty())
        << state;
  }
  EXPECT_EQ(JsonOf(Call("GET", "/v1/runs"))["runs"].size(), refused.size());
  EXPECT_NE(::access(Created().c_str(), F_OK), 0) << "a refused command ran";
  std::string metrics = Call("GET", "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("codespace_runs{state=\"refused\"} 2\n"));
  EXPECT_THAT(metrics, HasSubstr("codespace_runs{state=\"queued\"} 0\n"));
}

// `codespace submit` goes through the worker's socket and says what the worker said: the
// refusal, its reason, and a failing exit. The CLI's own environment has ip and nft on PATH, so
// had it decided alone (no worker), this unconfined host would have planned the allowlist run
// Filtered and queued it with exit 0 (UnconfinedLaneTest.PlanPredictsTheNamespace).
TEST_F(ApiOnRefusingHostTest, CliSubmitThroughTheSocketPrintsTheRefusalAndFails) {
  CliResult r = RunCodespace(install_,
                             {"-q", "submit", "--workspace", install_.workspace(), "--egress",
                              "allowlist", "--allow", "127.0.0.1", "--", "/bin/touch", Created()},
                             {{"CODESPACE_BWRAP_PATH", "/nonexistent/bwrap"}});
  EXPECT_EQ(r.code(), 125) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("refused")) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("not found on PATH")) << Describe(r);
  // The id on a line of its own (stdout), the refusal on stderr; their order is the buffers'.
  std::string id;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (IsValidRunId(line)) id = line;
  }
  ASSERT_TRUE(IsValidRunId(id)) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("run " + id + " refused: ")) << Describe(r);
  Json rec = JsonOf(Call("GET", "/v1/runs/" + id));
  EXPECT_EQ(rec["state"], "refused") << rec.dump();
  EXPECT_EQ(rec["plan"], "refused") << rec.dump();
  std::this_thread::sleep_for(500ms);
  EXPECT_NE(::access(Created().c_str(), F_OK), 0) << "a refused command ran";
  EXPECT_TRUE(JsonOf(Call("GET", "/v1/runs?state=queued"))["runs"].empty());

  // The same command with no worker answering decides alone, on the CLI's own host facts: it
  // queues the run (nothing launches it: no worker). So the refusal above was the worker's.
  TearDown();
  CliResult alone = RunCodespace(install_,
                                 {"-q", "submit", "--workspace", install_.workspace(), "--egress",
                                  "allowlist", "--allow", "127.0.0.1", "--", "/bin/true"},
                                 {{"CODESPACE_BWRAP_PATH", "/nonexistent/bwrap"}});
  EXPECT_EQ(alone.code(), 0) << Describe(alone);
  auto latest = LatestRecord(install_);
  EXPECT_EQ(latest["state"], "queued") << latest.dump();
  EXPECT_EQ(latest["plan"], "filtered") << latest.dump();
}

}  // namespace
}  // namespace codespace::lanes
