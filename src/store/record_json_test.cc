#include "store/record_json.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "base/testing/status_matchers.h"
#include "store/test_records.h"

namespace codespace {
namespace {

using ::codespace::testing::AllowlistSpec;
using ::codespace::testing::FullRecord;
using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(RunSpecJsonTest, AllowlistSpecRoundTrips) {
  Result<RunSpec> spec = AllowlistSpec();
  ASSERT_OK(spec);
  std::string json = RunSpecToJson(*spec);
  Result<RunSpec> parsed = RunSpecFromJson(json);
  ASSERT_OK(parsed);
  EXPECT_EQ(*parsed, *spec);
}

TEST(RunSpecJsonTest, EgressIsModeAndCanonicalEntries) {
  Result<RunSpec> spec = AllowlistSpec();
  ASSERT_OK(spec);
  EXPECT_THAT(
      RunSpecToJson(*spec),
      HasSubstr(R"("egress":{"mode":"allowlist","allowlist":["api.anthropic.com",)"
                R"("*.githubusercontent.com:443","203.0.113.0/24","[2001:db8::1]:8443"]})"));
  EXPECT_THAT(RunSpecToJson(*spec), HasSubstr(R"("timeout_seconds":900)"));
}

TEST(RunSpecJsonTest, NoneAndOpenPoliciesRoundTrip) {
  for (SandboxEgressPolicy mode : {SandboxEgressPolicy::kNone, SandboxEgressPolicy::kOpen}) {
    RunSpec spec;
    spec.argv = {"true"};
    spec.workspace = "/w";
    spec.egress.mode = mode;
    std::string json = RunSpecToJson(spec);
    EXPECT_THAT(json, HasSubstr(fmt::format(R"("egress":{{"mode":"{}","allowlist":[]}})",
                                            EgressPolicyName(mode))));
    Result<RunSpec> parsed = RunSpecFromJson(json);
    ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, spec);
  }
}

TEST(RunSpecJsonTest, OptionalFieldsDefault) {
  Result<RunSpec> parsed =
      RunSpecFromJson(R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"none"}})");
  ASSERT_OK(parsed);
  EXPECT_TRUE(parsed->env.empty());
  EXPECT_EQ(parsed->timeout.count(), 0);
  EXPECT_EQ(parsed->egress.mode, SandboxEgressPolicy::kNone);
}

// The file-system view is in every spec written (so a record says which the run got), and an
// absent one reads as the default view.
TEST(RunSpecJsonTest, FileSystemViewRoundTripsAndDefaults) {
  RunSpec spec;
  spec.argv = {"true"};
  spec.workspace = "/w";
  EXPECT_THAT(RunSpecToJson(spec), HasSubstr(R"("fs":{"view":"default","binds":[],"hide":[]})"));
  spec.fs.kind = FsViewKind::kHost;
  spec.fs.binds = {{"/opt/a", "/opt/a", true}, {"/srv/d", "/data", false}};
  spec.fs.hides = {"/opt/a/.env"};
  std::string json = RunSpecToJson(spec);
  EXPECT_THAT(json, HasSubstr(R"("fs":{"view":"host","binds":[{"source":"/opt/a","destination":)"
                              R"("/opt/a","read_only":true},{"source":"/srv/d","destination":)"
                              R"("/data","read_only":false}],"hide":["/opt/a/.env"]})"));
  Result<RunSpec> parsed = RunSpecFromJson(json);
  ASSERT_OK(parsed);
  EXPECT_EQ(*parsed, spec);
  Result<RunSpec> brief = RunSpecFromJson(
      R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"none"},"fs":{"binds":[{"source":"/x"}]}})");
  ASSERT_OK(brief);
  EXPECT_EQ(brief->fs.kind, FsViewKind::kDefault);
  EXPECT_EQ(brief->fs.binds, (std::vector<FsBind>{{"/x", "/x", true}}));
  Result<RunSpec> none =
      RunSpecFromJson(R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"none"}})");
  ASSERT_OK(none);
  EXPECT_TRUE(none->fs.is_default());
}

TEST(RunSpecJsonTest, InvalidUtf8IsReplacedNotThrown) {
  RunSpec spec;
  spec.argv = {"echo", std::string("bad\xff\xfe")};
  spec.workspace = "/w";
  std::string json = RunSpecToJson(spec);
  Result<RunSpec> parsed = RunSpecFromJson(json);
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed->argv[1], "bad\xef\xbf\xbd\xef\xbf\xbd");  // U+FFFD twice
}

struct BadJson {
  std::string_view json;
  std::string_view message;  // a part of the error
};

TEST(RunSpecJsonTest, MalformedSpecsAreErrors) {
  const BadJson kCases[] = {
      {"", "run spec JSON: [json.exception.parse_error"},
      {"{", "parse_error"},
      {R"({"argv":["a"],)", "parse_error"},
      {"\"\xff\"", "parse_error"},
      {"null", "expected an object, got null"},
      {"[]", "expected an object, got array"},
      {R"({"workspace":"/w","egress":{"mode":"none"}})", R"("argv": missing)"},
      {R"({"argv":"ls","workspace":"/w","egress":{"mode":"none"}})",
       R"("argv": expected an array of strings, got string)"},
      {R"({"argv":["ls",7],"workspace":"/w","egress":{"mode":"none"}})",
       R"("argv[1]": expected a string, got number)"},
      {R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"none"},"timeuot":5})",
       R"("timeuot": unknown field)"},
      {R"({"argv":["ls"],"workspace":"/w","egress":"none"})",
       R"("egress": expected an object, got string)"},
      {R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"wide-open"}})", R"("egress.mode": )"},
      {R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"allowlist"}})", R"("egress": )"},
      {R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"allowlist","allowlist":["ok.com","exa mple.com"]}})",
       R"("egress.allowlist[1]": )"},
      {R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"none","allowlist":["ok.com"]}})",
       R"("egress": )"},
      {R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"none"},"timeout_seconds":-1})",
       R"("timeout_seconds": must not be negative)"},
      {R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"none"},"timeout_seconds":1.5})",
       R"("timeout_seconds": expected an integer, got number)"},
      {R"({"argv":["ls"],"workspace":"/w","egress":{"mode":"none"},"timeout_seconds":18446744073709551615})",
       R"("timeout_seconds": integer out of range)"},
  };
  for (const BadJson& bad : kCases) {
    Result<RunSpec> parsed = RunSpecFromJson(bad.json);
    EXPECT_THAT(parsed, StatusIs(StatusCode::kInvalidArgument)) << bad.json;
    EXPECT_THAT(parsed, StatusHasMessage(std::string(bad.message))) << bad.json;
  }
}

TEST(RunSpecJsonTest, DeepNestingIsAnErrorNotACrash) {
  std::string deep(100'000, '[');
  deep += std::string(100'000, ']');
  EXPECT_THAT(RunSpecFromJson(deep), StatusIs(StatusCode::kInvalidArgument));
}

TEST(RunRecordJsonTest, FullRecordRoundTrips) {
  Result<RunRecord> record = FullRecord("0123456789abcdef");
  ASSERT_OK(record);
  for (bool pretty : {false, true}) {
    std::string json = RunRecordToJson(*record, pretty);
    Result<RunRecord> parsed = RunRecordFromJson(json);
    ASSERT_OK(parsed) << json;
    EXPECT_EQ(*parsed, *record);
  }
}

TEST(RunRecordJsonTest, FieldsAreNamedAsDocumented) {
  Result<RunRecord> record = FullRecord("0123456789abcdef");
  ASSERT_OK(record);
  record->signal = std::nullopt;
  std::string json = RunRecordToJson(*record, /*pretty=*/false);
  EXPECT_THAT(json, HasSubstr(R"({"id":"0123456789abcdef","spec":{"argv":)"));
  EXPECT_THAT(json, HasSubstr(R"("plan":"filtered","network":"filtered",)"
                              R"("namespace":"cs-1a2b3c4d5e6f","state":"exited",)"
                              R"("exit_code":3,"signal":null,"reason":"",)"
                              R"("created_ms":1700000000123,"started_ms":1700000000456,)"
                              R"("ended_ms":1700000090789,"setup_ms":41,)"
                              R"("host_uid":null,"host_gid":null,)"
                              R"("seccomp":"sha256:5ec0)" + std::string(60, '0') + R"(",)"
                              R"("network_report":{"dns_admitted":[],)"
                              R"("dns_refused":[],"dropped_packets":0,"broker_connections":0,)"
                              R"("broker_failed":0,"broker_bytes_to":0,"broker_bytes_from":0},)"
                              R"("logs":{"stdout":)"
                              R"({"bytes":0,"sha256":"","sealed":false},"stderr":{"bytes":0,)"
                              R"("sha256":"","sealed":false}},"name":"","idempotency_key":""})"));
  EXPECT_THAT(json, Not(HasSubstr("\n")));
  EXPECT_THAT(RunRecordToJson(*record, /*pretty=*/true), HasSubstr("\n  \"id\": "));
}

TEST(RunRecordJsonTest, NetworkReportRoundTrips) {
  Result<RunRecord> record = FullRecord("00112233aabbccdd");
  ASSERT_OK(record);
  record->network_report.dns_admitted = {"allowed.test 203.0.113.10", "api.x.test [2001:db8::1]:443"};
  record->network_report.dns_refused = {"denied.test"};
  record->network_report.dropped_packets = 42;
  Result<RunRecord> back = RunRecordFromJson(RunRecordToJson(*record));
  ASSERT_OK(back);
  EXPECT_EQ(back->network_report, record->network_report);
  EXPECT_THAT(RunRecordFromJson(R"({"id":"x"})"), StatusHasMessage("run record JSON"));
  Result<NetworkReport> bad = NetworkReportFromJson(R"({"dns_admitted":[],"dns_refused":[],"dropped_packets":-1})");
  EXPECT_THAT(bad, StatusHasMessage("must not be negative"));
}

TEST(RunRecordJsonTest, SignalAndNullExitCodeRoundTrip) {
  Result<RunRecord> record = FullRecord("fedcba9876543210");
  ASSERT_OK(record);
  record->state = RunState::kCancelled;
  record->exit_code = std::nullopt;
  record->signal = 9;
  record->plan = Plan::kSevered;
  record->network = NetworkPosture::kSevered;
  record->reason = "NetworkSevered: nft not found";
  std::string json = RunRecordToJson(*record, false);
  EXPECT_THAT(json, HasSubstr(R"("exit_code":null,"signal":9)"));
  Result<RunRecord> parsed = RunRecordFromJson(json);
  ASSERT_OK(parsed);
  EXPECT_EQ(*parsed, *record);
}

// A root worker's run (docs/identity.md): the host uid and gid it was leased round-trip; a
// record from before them (no fields) reads as unset; a negative uid is refused.
TEST(RunRecordJsonTest, HostUidAndGidRoundTrip) {
  Result<RunRecord> record = FullRecord("0123456789abcdef");
  ASSERT_OK(record);
  record->host_uid = 600001;
  record->host_gid = 600001;
  std::string json = RunRecordToJson(*record);
  EXPECT_THAT(json, HasSubstr(R"("host_uid":600001,"host_gid":600001)"));
  Result<RunRecord> parsed = RunRecordFromJson(json);
  ASSERT_OK(parsed);
  EXPECT_EQ(*parsed, *record);
  std::string bad = json;
  bad.replace(bad.find("600001"), 6, "-5");
  EXPECT_FALSE(RunRecordFromJson(bad).ok());
}

TEST(RunRecordJsonTest, SetupTimeIsNullWhenUnsetAndMayBeMissing) {
  Result<RunRecord> record = FullRecord("0123456789abcdef");
  ASSERT_OK(record);
  record->state = RunState::kRefused;
  record->setup_ms = std::nullopt;
  std::string json = RunRecordToJson(*record);
  EXPECT_THAT(json, HasSubstr(R"("ended_ms":1700000090789,"setup_ms":null,"host_uid":null,)"
                              R"("host_gid":null,"seccomp":")"));
  Result<RunRecord> parsed = RunRecordFromJson(json);
  ASSERT_OK(parsed);
  EXPECT_EQ(*parsed, *record);
  // A record from a codespace before setup was measured (an older worker answering a newer
  // CLI) has no such field: it reads as unset.
  std::string old = json;
  old.erase(old.find(R"("setup_ms":null,)"), std::string_view(R"("setup_ms":null,)").size());
  ASSERT_THAT(old, Not(HasSubstr("setup_ms")));
  parsed = RunRecordFromJson(old);
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed->setup_ms, std::nullopt);
  EXPECT_EQ(*parsed, *record);
}

TEST(RunRecordJsonTest, MalformedRecordsAreErrors) {
  Result<RunRecord> record = FullRecord("0123456789abcdef");
  ASSERT_OK(record);
  const std::string good = RunRecordToJson(*record, false);
  auto replace = [&](std::string_view from, std::string_view to) {
    std::string json = good;
    size_t at = json.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) json.replace(at, from.size(), to);
    return json;
  };
  const std::pair<std::string, std::string_view> kCases[] = {
      {"", "run record JSON: "},
      {good.substr(0, good.size() / 2), "parse_error"},
      {good + "x", "parse_error"},
      {"42", "expected an object, got number"},
      {replace(R"("state":"exited")", R"("state":"finished")"), R"("state": )"},
      {replace(R"("plan":"filtered")", R"("plan":"wide")"), R"("plan": )"},
      {replace(R"("network":"filtered")", R"("network":"wide")"), R"("network": )"},
      {replace(R"("exit_code":3)", R"("exit_code":"3")"),
       R"("exit_code": expected an integer, got string)"},
      {replace(R"("exit_code":3)", R"("exit_code":4294967296)"),
       R"("exit_code": integer out of range)"},
      {replace(R"("signal":null,)", ""), R"("signal": missing)"},
      {replace(R"("created_ms":1700000000123)", R"("created_ms":null)"),
       R"("created_ms": expected an integer, got null)"},
      {replace(R"("id":"0123456789abcdef")", R"("id":["x"])"), R"("id": expected a string)"},
      {replace(R"("workspace":)", R"("workspaec":)"), R"("spec.workspaec": unknown field)"},
      {replace(R"("203.0.113.0/24")", R"("203.0.113.0/33")"), R"("spec.egress.allowlist[2]": )"},
      {replace(R"("reason":"")", R"("reason":"","extra":1)"), R"("extra": unknown field)"},
      {replace(R"("setup_ms":41)", R"("setup_ms":"41")"),
       R"("setup_ms": expected an integer, got string)"},
      {replace(R"("setup_ms":41)", R"("setup_ms":-1)"), R"("setup_ms": must not be negative)"},
      {replace(R"("setup_ms":41)", R"("setup_ms":0.5)"),
       R"("setup_ms": expected an integer, got number)"},
  };
  for (const auto& [json, message] : kCases) {
    Result<RunRecord> parsed = RunRecordFromJson(json);
    EXPECT_THAT(parsed, StatusIs(StatusCode::kInvalidArgument)) << json;
    EXPECT_THAT(parsed, StatusHasMessage(std::string(message))) << json;
  }
}

}  // namespace
}  // namespace codespace

namespace codespace {
namespace {

TEST(RunSpecJsonTest, LimitsRoundTripAndTakeTheCliSpelling) {
  RunSpec spec;
  spec.argv = {"true"};
  spec.workspace = "/w";
  spec.limits = {512ull << 20, 64, 1500, 8ull << 20, 1024};
  auto back = RunSpecFromJson(RunSpecToJson(spec));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->limits, spec.limits);
  auto typed = RunSpecFromJson(
      R"({"argv":["true"],"workspace":"/w","egress":{"mode":"none"},)"
      R"("limits":{"memory":"512M","cpus":"1.5","pids":64,"tmp_size":"8M","nofile":1024}})");
  ASSERT_TRUE(typed.ok()) << typed.status().message();
  EXPECT_EQ(typed->limits, spec.limits);
  auto bad = RunSpecFromJson(
      R"({"argv":["true"],"workspace":"/w","egress":{"mode":"none"},"limits":{"memory":"lots"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"limits.memory\""), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(RunSpecFromJson(R"({"argv":["true"],"workspace":"/w","egress":{"mode":"none"},)"
                               R"("limits":{"memroy":1}})")
                   .ok());
}

TEST(RunRecordJsonTest, UsageRoundTrips) {
  RunUsage u;
  u.peak_memory_bytes = 1 << 20;
  u.cpu_user_usec = 5;
  u.oom_kills = 1;
  u.limit_kill = "memory";
  auto back = RunUsageFromJson(RunUsageToJson(u));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, u);
  EXPECT_TRUE(RunUsageFromJson("{}")->empty());
}

}  // namespace
}  // namespace codespace
