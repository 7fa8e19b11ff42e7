// The broker relay with the real binary: a stub model API on the worker side (a unix socket or a
// loopback TCP port), reached from inside the run at CODESPACE_BROKER_URL, in every network mode
// and lane where the plan launches; and nothing but the broker is reachable through it.
#include <fmt/format.h>

#include "harness/fake_internet.h"
#include "harness/stub_model_api.h"
#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;

// Inside: GET / through the relay (the stub answers 200), then show the announced URLs.
std::vector<std::string> ThroughRelay(const StagedInstall& install) {
  return {"/bin/sh", "-c",
          "\"$0\" http-get 127.0.0.1 \"${CODESPACE_BROKER_URL##*:}\" && "
          "echo \"url=$CODESPACE_BROKER_URL anthropic=$ANTHROPIC_BASE_URL\"",
          install.probe()};
}

class BrokerRelayTest : public ::testing::TestWithParam<uid_t> {
 protected:
  // A filtered run's supervisor tears its network down after the run is recorded: let it
  // finish before the fake internet goes.
  void TearDown() override {
    if (install_) install_->WaitForSupervisors();
  }
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    install_ = std::make_unique<StagedInstall>(GetParam());
    ASSERT_TRUE(install_->ok()) << install_->error();
    auto stub = StubModelApi::StartUnix(install_->root() + "/broker.sock");
    ASSERT_TRUE(stub.ok()) << stub.status().ToString();
    stub_ = std::move(*stub);
    broker_ = stub_->broker_address();
    ::chmod((install_->root() + "/broker.sock").c_str(), 0666);
  }
  CliResult Run(const std::vector<std::string>& flags, const std::vector<std::string>& cmd,
                const std::map<std::string, std::string>& env = {},
                const std::vector<std::string>& wrapper = {}) {
    std::vector<std::string> a = {"run",   "--workspace",  install_->workspace(), "--broker",
                                  broker_, "--broker-env", "ANTHROPIC_BASE_URL"};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return RunCodespace(*install_, a, env, wrapper);
  }
  std::unique_ptr<StagedInstall> install_;
  std::unique_ptr<StubModelApi> stub_;
  std::string broker_;
};

TEST_P(BrokerRelayTest, SeveredRunReachesItsBrokerAndNothingElse) {
  LoopbackListener other;
  CliResult r = Run({"--egress", "none"}, ThroughRelay(*install_));
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("url=http://127.0.0.1:"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("anthropic=http://127.0.0.1:[0-9]+"));
  EXPECT_EQ(stub_->RequestsTo("/").size(), 1u);
  auto rec = LatestRecord(*install_);
  EXPECT_EQ(rec["network"], "severed") << rec.dump();
  EXPECT_EQ(rec["network_report"]["broker_connections"], 1);
  EXPECT_GT(rec["network_report"]["broker_bytes_to"].get<uint64_t>(), 0u);
  EXPECT_GT(rec["network_report"]["broker_bytes_from"].get<uint64_t>(), 0u);
  // The relay is the only way out: the worker's own loopback service is not reachable.
  CliResult blocked = Run({"--egress", "none"}, {install_->probe(), "no-connect", "127.0.0.1",
                                                 std::to_string(other.port())});
  EXPECT_EQ(blocked.code(), 0) << Describe(blocked);
}

TEST_P(BrokerRelayTest, SharedRunReachesItsBroker) {
  CliResult r = Run({"--egress", "open"}, ThroughRelay(*install_));
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_EQ(stub_->RequestsTo("/").size(), 1u);
}

TEST_P(BrokerRelayTest, BrokerDownMeansARefusedConnectionNotAFailedRun) {
  stub_.reset();  // the broker is gone
  CliResult r = Run({"--egress", "none"},
                    {"/bin/sh", "-c",
                     "\"$0\" connect 127.0.0.1 \"${CODESPACE_BROKER_URL##*:}\"; "
                     "\"$0\" http-get 127.0.0.1 \"${CODESPACE_BROKER_URL##*:}\"; echo ran",
                     install_->probe()});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("ran"));
  auto rec = LatestRecord(*install_);
  EXPECT_GE(rec["network_report"]["broker_failed"].get<uint64_t>(), 1u) << rec.dump();
}

TEST_P(BrokerRelayTest, UnconfinedRunReachesItsBrokerWhereThePlanLaunches) {
  // Unconfined: `none` is severed by a namespace of its own (a user namespace for uid 1654).
  CliResult r = Run({"--egress", "none"}, ThroughRelay(*install_),
                    {{"CODESPACE_BWRAP_PATH", "/nonexistent/bwrap"}});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("confines=no"));
  EXPECT_EQ(stub_->RequestsTo("/").size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Lanes, BrokerRelayTest, ::testing::Values(0u, kUnprivilegedUid),
                         [](const auto& param_info) {
                           return param_info.param == 0 ? std::string("Root")
                                                        : std::string("Uid1654");
                         });

TEST(BrokerRelayFilteredTest, FilteredRunReachesItsBrokerAndNotTheWorker) {
  REQUIRE_ROOT_FOR_LANES();
  // Made first, so destroyed last: the install waits for its supervisors (which tear a
  // filtered run's network down after recording it) before the fake internet goes.
  auto net = FakeInternet::Create();
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  StagedInstall install(0);
  ASSERT_TRUE(install.ok()) << install.error();
  ASSERT_TRUE((*net)->SetWorkerHostForwarding(true).ok());
  auto stub = StubModelApi::StartUnix(install.root() + "/broker.sock");
  ASSERT_TRUE(stub.ok());
  CliResult r = RunCodespace(
      install,
      {"run", "--workspace", install.workspace(), "--egress", "allowlist", "--allow",
       "allowed.test", "--broker", (*stub)->broker_address(), "--", "/bin/sh", "-c",
       fmt::format("\"$0\" http-get 127.0.0.1 \"${{CODESPACE_BROKER_URL##*:}}\" && \"$0\" "
                   "no-connect {} 80",
                   kDeniedV4),
       install.probe()},
      {{"CODESPACE_DNS_UPSTREAM", kDnsServerV4}},
      (*net)->WorkerHostArgv({}, WorkerResolvConf::kHost));
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_EQ((*stub)->RequestsTo("/").size(), 1u);
  auto rec = LatestRecord(install);
  EXPECT_EQ(rec["network"], "filtered") << rec.dump();
  EXPECT_EQ(rec["network_report"]["broker_connections"], 1);
}

}  // namespace
}  // namespace codespace::lanes
