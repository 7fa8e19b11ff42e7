// The real agent CLIs (npm @anthropic-ai/claude-code and @openai/codex, installed by `make test`
// under /var/cache/codespace-agents) run as the sandboxed command, in the default file-system
// view with their install directory given by --ro-bind and the view's private HOME, with their
// model API pointed at the broker relay and a stub model API behind it, and dummy keys. Each
// prints the stub's answer; in the same lane a direct connection to a non-allowlisted address
// fails. And the README's quick start, run as written.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file_util.h"
#include "harness/fake_internet.h"
#include "harness/stub_model_api.h"
#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;

constexpr const char* kAgentsDir = "/var/cache/codespace-agents";
constexpr const char* kAgents = "/var/cache/codespace-agents/node_modules/.bin";

std::string Claude() { return fmt::format("{}/claude", kAgents); }
std::string Codex() { return fmt::format("{}/codex", kAgents); }

// codex needs the relay's URL inside its provider config: built in the sandbox's shell.
std::string CodexScript() {
  return fmt::format(
      "exec {} exec --skip-git-repo-check -c "
      "\"model_providers.stub={{name=\\\"stub\\\",base_url=\\\"$CODESPACE_BROKER_URL/v1\\\","
      "env_key=\\\"OPENAI_API_KEY\\\",wire_api=\\\"responses\\\"}}\" -c model_provider=stub "
      "\"say hi\"",
      Codex());
}

struct Lane {
  const char* name;
  uid_t uid;
  bool filtered;
};

class AgentCliTest : public ::testing::TestWithParam<Lane> {
 protected:
  // A filtered run's supervisor tears its network down after the run is recorded: let it
  // finish before the fake internet goes.
  void TearDown() override {
    if (install_) install_->WaitForSupervisors();
  }
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    if (::access(Claude().c_str(), X_OK) != 0 || ::access(Codex().c_str(), X_OK) != 0) {
      GTEST_SKIP() << "the agent CLIs are not installed under " << kAgents
                   << " (make test installs them from npm)";
    }
    install_ = std::make_unique<StagedInstall>(GetParam().uid);
    ASSERT_TRUE(install_->ok()) << install_->error();
    auto stub = StubModelApi::StartUnix(install_->root() + "/broker.sock");
    ASSERT_TRUE(stub.ok()) << stub.status().ToString();
    stub_ = std::move(*stub);
    ::chmod((install_->root() + "/broker.sock").c_str(), 0666);
    if (GetParam().filtered) {
      auto net = FakeInternet::Create();
      ASSERT_TRUE(net.ok()) << net.status().ToString();
      net_ = std::move(*net);
      ASSERT_TRUE(net_->SetWorkerHostForwarding(true).ok());
    }
  }
  CliResult Run(const std::vector<std::string>& cmd, const std::vector<std::string>& broker_env) {
    std::vector<std::string> a = {"run",     "--workspace", install_->workspace(),   "--timeout",
                                  "120",     "--broker",    stub_->broker_address(), "--ro-bind",
                                  kAgentsDir};
    for (const auto& e : broker_env) {
      a.push_back("--broker-env");
      a.push_back(e);
    }
    if (GetParam().filtered) {
      for (const char* f : {"--egress", "allowlist", "--allow", "allowed.test"}) a.push_back(f);
    } else {
      for (const char* f : {"--egress", "none"}) a.push_back(f);
    }
    for (const std::string& e :
         {std::string("ANTHROPIC_API_KEY=dummy"), std::string("OPENAI_API_KEY=dummy"),
          std::string("DISABLE_TELEMETRY=1"),
          std::string("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"),
          std::string("DISABLE_AUTOUPDATER=1"), std::string("CI=1")}) {
      a.push_back("--env");
      a.push_back(e);
    }
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    std::map<std::string, std::string> env;
    std::vector<std::string> wrapper;
    if (net_) {
      env["CODESPACE_DNS_UPSTREAM"] = kDnsServerV4;
      wrapper = net_->WorkerHostArgv({}, WorkerResolvConf::kHost);
    }
    return RunCodespace(*install_, a, env, wrapper);
  }

  std::unique_ptr<StagedInstall> install_;
  std::unique_ptr<StubModelApi> stub_;
  std::unique_ptr<FakeInternet> net_;
};

TEST_P(AgentCliTest, ClaudePrintsTheStubsAnswerThroughTheRelay) {
  CliResult r = Run({Claude(), "-p", "say hi"}, {"ANTHROPIC_BASE_URL"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("stub says hi")) << Describe(r);
  EXPECT_FALSE(stub_->RequestsTo("/v1/messages").empty());
}

TEST_P(AgentCliTest, CodexPrintsTheStubsAnswerThroughTheRelay) {
  CliResult r = Run({"/bin/sh", "-c", CodexScript()}, {});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("stub says hi")) << Describe(r);
  EXPECT_FALSE(stub_->RequestsTo("/v1/responses").empty());
}

TEST_P(AgentCliTest, ADirectConnectionToANonAllowlistedAddressFails) {
  CliResult r = Run({install_->probe(), "no-connect", "203.0.113.20", "80"}, {});
  EXPECT_EQ(r.code(), 0) << Describe(r);
}

// The README's quick start, between its quick-start markers, as a shell runs it: the block's
// comment lines and fences dropped, nothing else changed.
std::string ReadmeQuickStart() {
  auto readme = ReadFileToString(CODESPACE_README_PATH);
  if (!readme.ok()) return "";
  const std::string begin = "<!-- quick-start:begin -->", end = "<!-- quick-start:end -->";
  size_t b = readme->find(begin), e = readme->find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) return "";
  std::string block = readme->substr(b + begin.size(), e - b - begin.size()), script;
  for (size_t at = 0; at < block.size();) {
    size_t nl = block.find('\n', at);
    if (nl == std::string::npos) nl = block.size();
    std::string line = block.substr(at, nl - at);
    at = nl + 1;
    if (line.rfind("```", 0) == 0 || line.rfind("#", 0) == 0 || line.empty()) continue;
    script += line + "\n";
  }
  return script;
}

// The quick start names `codespace` on PATH, the workspace as the current directory and the
// broker's socket as $BROKER: the staged install, its workspace, the stub.
TEST_P(AgentCliTest, TheReadmeQuickStartRunsAsWritten) {
  if (GetParam().filtered || GetParam().uid != 0)
    GTEST_SKIP() << "the quick start is a root, --egress none run";
  const std::string script = ReadmeQuickStart();
  ASSERT_THAT(script, HasSubstr("codespace run")) << "no quick start in " << CODESPACE_README_PATH;
  std::string broker = stub_->broker_address();
  ASSERT_EQ(broker.rfind("unix:", 0), 0u);
  auto env = CodespaceEnvironment(*install_,
                                  {{"PATH", install_->root() + "/bin:/usr/local/bin:/usr/bin:/bin"},
                                   {"BROKER", broker.substr(5)}});
  auto r = RunCommand({"/bin/sh", "-c", "cd \"$0\" && " + script, install_->workspace()}, env);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status.ShellCode(), 0) << script << r->output;
  EXPECT_THAT(r->output, HasSubstr("stub says hi")) << script << r->output;
  EXPECT_FALSE(stub_->RequestsTo("/v1/messages").empty());
  auto rec = LatestRecord(*install_);
  EXPECT_EQ(rec["spec"]["fs"]["view"], "default") << rec.dump();
}

INSTANTIATE_TEST_SUITE_P(Lanes, AgentCliTest,
                         ::testing::Values(Lane{"RootSevered", 0, false},
                                           Lane{"RootFiltered", 0, true},
                                           Lane{"Uid1654Severed", kUnprivilegedUid, false}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace codespace::lanes
