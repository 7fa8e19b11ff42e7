#include "api/api_handler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/testing/temp_dir.h"
#include "store/sqlite_run_store.h"

namespace codespace::api {
namespace {

using ::testing::HasSubstr;

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
    handler_ =
        std::make_unique<ApiHandler>(RefusingHost(), store_.get(), dir_.path());
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
  EXPECT_THAT(metrics, HasSubstr("codespace_run_start_seconds_count 0\n"));
  auto list = nlohmann::json::parse(Do("GET", "/v1/runs", "", {{"state", "refused"}}).body);
  EXPECT_EQ(list["runs"].size(), 1u);
  EXPECT_EQ(Do("GET", "/v1/runs", "", {{"offset", "x"}}).status, 400);
  EXPECT_EQ(Do("GET", "/v1/runs", "", {{"colour", "red"}}).status, 400);
  EXPECT_EQ(Do("POST", "/v1/runs/" + id + "/cancel").status, 409);
  EXPECT_EQ(Do("GET", "/v1/runs/not-an-id").status, 404);
  EXPECT_EQ(Do("PUT", "/v1/posture").status, 405);
}

}  // namespace
}  // namespace codespace::api
