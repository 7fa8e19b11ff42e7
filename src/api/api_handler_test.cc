#include "api/api_handler.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "base/testing/temp_dir.h"
#include "store/sqlite_run_store.h"

namespace codespace::api {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A host that neither confines nor has the filtering tools: admission refuses none/allowlist.
HostFacts RefusingHost() {
  HostFacts f;
  f.confines = false;
  f.confine_error = "no bwrap (test)";
  f.filter.tools = false;
  f.filter.tools_error = "no ip (test)";
  f.verdict = DecideFilter(f.filter);
  return f;
}

class ApiHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = SqliteRunStore::Open(dir_.path() + "/codespace.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    handler_ = std::make_unique<ApiHandler>(RefusingHost(), store_.get(), dir_.path());
  }
  HttpResponse Do(const std::string& method, const std::string& path, const std::string& body = "",
                  std::map<std::string, std::string> query = {}) {
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.target = path;
    req.body = body;
    req.query = std::move(query);
    return handler_->Respond(req);
  }
  std::string Spec(const std::string& mode) {
    return R"({"argv":["true"],"workspace":")" + dir_.path() + R"(","egress":{"mode":")" + mode +
           R"("}})";
  }
  TempDir dir_;
  std::unique_ptr<SqliteRunStore> store_;
  std::unique_ptr<ApiHandler> handler_;
};

TEST_F(ApiHandlerTest, RefusedRunIs422WithTheReasonAndTheRecord) {
  HttpResponse r = Do("POST", "/v1/runs", Spec("none"));
  ASSERT_EQ(r.status, 422) << r.body;
  auto j = nlohmann::json::parse(r.body);
  EXPECT_FALSE(j["error"].get<std::string>().empty());
  EXPECT_EQ(j["record"]["state"], "refused");
  EXPECT_EQ(j["record"]["reason"], j["error"]);
  std::string id = j["record"]["id"];
  EXPECT_EQ(Do("GET", "/v1/runs/" + id).status, 200);
  // Open is Shared everywhere: admitted and queued.
  HttpResponse open = Do("POST", "/v1/runs", Spec("open"));
  EXPECT_EQ(open.status, 201) << open.body;
  HttpResponse admission = Do("POST", "/v1/admission", Spec("none"));
  ASSERT_EQ(admission.status, 200);
  EXPECT_EQ(nlohmann::json::parse(admission.body)["admitted"], false);
  std::string metrics = handler_->Metrics();
  EXPECT_THAT(metrics, HasSubstr("codespace_runs{state=\"refused\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("codespace_runs{state=\"queued\"} 1\n"));
  // Neither run started: no setup time anywhere.
  EXPECT_THAT(metrics, HasSubstr("codespace_run_setup_seconds_count{network=\"severed\"} 0\n"));
  EXPECT_THAT(metrics, HasSubstr("codespace_run_setup_seconds_count{network=\"shared\"} 0\n"));
  EXPECT_THAT(metrics, Not(HasSubstr("codespace_run_start_seconds")));
  auto list = nlohmann::json::parse(Do("GET", "/v1/runs", "", {{"state", "refused"}}).body);
  EXPECT_EQ(list["runs"].size(), 1u);
  EXPECT_EQ(Do("GET", "/v1/runs", "", {{"offset", "x"}}).status, 400);
  EXPECT_EQ(Do("GET", "/v1/runs", "", {{"colour", "red"}}).status, 400);
  EXPECT_EQ(Do("POST", "/v1/runs/" + id + "/cancel").status, 409);
  EXPECT_EQ(Do("GET", "/v1/runs/not-an-id").status, 404);
  EXPECT_EQ(Do("PUT", "/v1/posture").status, 405);
}

// Records with known setup times give exactly these histogram lines: cumulative buckets (a
// value on a bound counts in it), one series per network posture, sums in seconds; records
// without a setup time (never started, or recorded before it was measured) count nowhere.
// A wildcard over a public suffix: creating the run is refused, and so is its admission, with
// the same status and words (they once disagreed: the admission said admitted).
TEST_F(ApiHandlerTest, AdmissionRefusesAPublicSuffixWildcardAsCreationDoes) {
  std::string spec = R"({"argv":["true"],"workspace":")" + dir_.path() +
                     R"(","egress":{"mode":"allowlist","allowlist":["*.com"]}})";
  HttpResponse created = Do("POST", "/v1/runs", spec);
  HttpResponse admitted = Do("POST", "/v1/admission", spec);
  EXPECT_GE(created.status, 400) << created.body;
  EXPECT_LT(created.status, 500) << created.body;
  EXPECT_EQ(admitted.status, created.status) << admitted.body;
  EXPECT_EQ(nlohmann::json::parse(admitted.body)["error"],
            nlohmann::json::parse(created.body)["error"]);
  EXPECT_THAT(admitted.body, ::testing::HasSubstr("public suffix"));
}

TEST_F(ApiHandlerTest, SetupHistogramFromRecords) {
  int n = 0;
  auto add = [&](NetworkPosture network, std::optional<int64_t> setup_ms) {
    RunRecord r;
    r.id = fmt::format("{:016x}", ++n);
    r.spec.argv = {"true"};
    r.spec.workspace = "/w";
    r.plan = network == NetworkPosture::kNotRun ? Plan::kRefused : Plan::kSevered;
    r.network = network;
    r.state = setup_ms ? RunState::kExited : RunState::kAborted;
    r.created_ms = 1000 + n;
    r.setup_ms = setup_ms;
    ASSERT_TRUE(store_->Insert(r).ok());
  };
  add(NetworkPosture::kSevered, 3);
  add(NetworkPosture::kSevered, 5);  // on the first bound: counts in le="0.005"
  add(NetworkPosture::kSevered, 40);
  add(NetworkPosture::kSevered, 0);  // under a millisecond is still a setup
  add(NetworkPosture::kFiltered, 250);
  add(NetworkPosture::kFiltered, 12000);         // over every bound: +Inf only
  add(NetworkPosture::kFiltered, std::nullopt);  // aborted at setup
  add(NetworkPosture::kNotRun, std::nullopt);    // refused
  std::string metrics = handler_->Metrics();
  size_t at = metrics.find("# HELP codespace_run_setup_seconds ");
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_EQ(metrics.substr(at),
            "# HELP codespace_run_setup_seconds Sandbox and network setup of runs, from the "
            "supervisor's launch to the sandbox reporting started (records' setup_ms).\n"
            "# TYPE codespace_run_setup_seconds histogram\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"0.005\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"0.01\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"0.025\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"0.05\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"0.1\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"0.25\"} 1\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"0.5\"} 1\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"1\"} 1\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"2.5\"} 1\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"5\"} 1\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"10\"} 1\n"
            "codespace_run_setup_seconds_bucket{network=\"filtered\",le=\"+Inf\"} 2\n"
            "codespace_run_setup_seconds_sum{network=\"filtered\"} 12.25\n"
            "codespace_run_setup_seconds_count{network=\"filtered\"} 2\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"0.005\"} 3\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"0.01\"} 3\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"0.025\"} 3\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"0.05\"} 4\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"0.1\"} 4\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"0.25\"} 4\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"0.5\"} 4\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"1\"} 4\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"2.5\"} 4\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"5\"} 4\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"10\"} 4\n"
            "codespace_run_setup_seconds_bucket{network=\"severed\",le=\"+Inf\"} 4\n"
            "codespace_run_setup_seconds_sum{network=\"severed\"} 0.048\n"
            "codespace_run_setup_seconds_count{network=\"severed\"} 4\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"0.005\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"0.01\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"0.025\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"0.05\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"0.1\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"0.25\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"0.5\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"1\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"2.5\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"5\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"10\"} 0\n"
            "codespace_run_setup_seconds_bucket{network=\"shared\",le=\"+Inf\"} 0\n"
            "codespace_run_setup_seconds_sum{network=\"shared\"} 0\n"
            "codespace_run_setup_seconds_count{network=\"shared\"} 0\n");
  EXPECT_THAT(metrics, HasSubstr("codespace_runs{state=\"exited\"} 6\n"));
}

}  // namespace
}  // namespace codespace::api
