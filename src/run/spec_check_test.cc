#include "run/spec_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/testing/status_matchers.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;

RunSpec Good() {
  RunSpec s;
  s.argv = {"true"};
  s.workspace = "/tmp";
  return s;
}

struct Case {
  const char* name;
  void (*edit)(RunSpec*);
  const char* field;    // "" with message "": accepted
  const char* message;  // a part of the message
};

// The pure rules: one table for every caller (the CLI's flags and the API's JSON both end here).
TEST(CheckSpecTest, OneRuleTable) {
  const Case cases[] = {
      {"good", [](RunSpec*) {}, "", ""},
      {"no argv", [](RunSpec* s) { s->argv.clear(); }, "argv", "argv must name a command"},
      {"empty argv0", [](RunSpec* s) { s->argv = {""}; }, "argv[0]", "must not be empty"},
      {"NUL in argv", [](RunSpec* s) { s->argv.push_back(std::string("a\0b", 3)); }, "argv[1]",
       "NUL byte"},
      {"env without =",
       [](RunSpec* s) {
         s->env = {"A=1", "B"};
       },
       "env[1]", "expected KEY=VALUE"},
      {"env =x", [](RunSpec* s) { s->env = {"=x"}; }, "env[0]", "expected KEY=VALUE"},
      {"NUL in env", [](RunSpec* s) { s->env = {std::string("A=\0", 3)}; }, "env[0]",
       "expected KEY=VALUE"},
      {"relative workspace", [](RunSpec* s) { s->workspace = "tmp"; }, "workspace",
       "not an absolute path"},
      {"dotdot", [](RunSpec* s) { s->workspace = "/tmp/../etc"; }, "workspace", "\"..\""},
      {"dot", [](RunSpec* s) { s->workspace = "/tmp/./x"; }, "workspace", "not a normalized path"},
      {"double slash", [](RunSpec* s) { s->workspace = "/tmp//x"; }, "workspace",
       "not a normalized path"},
      {"trailing slash", [](RunSpec* s) { s->workspace = "/tmp/"; }, "workspace",
       "not a normalized path"},
      {"root", [](RunSpec* s) { s->workspace = "/"; }, "", ""},
      {"bad broker", [](RunSpec* s) { s->broker.address = "10.0.0.1:80"; }, "broker.address",
       "not a loopback address"},
      {"good broker", [](RunSpec* s) { s->broker.address = "127.0.0.1:8080"; }, "", ""},
  };
  for (const Case& c : cases) {
    RunSpec s = Good();
    c.edit(&s);
    SpecError e = CheckSpec(s);
    EXPECT_EQ(e.field, c.field) << c.name << ": " << e.message;
    EXPECT_THAT(e.message, ::testing::HasSubstr(c.message)) << c.name;
    EXPECT_EQ(e.ok(), std::string(c.message).empty()) << c.name;
  }
}

// What `codespace run` used to accept and leave to fail inside bubblewrap, while `submit` refused
// it up front: now both refuse it, in the same words (and both accept a broker that is down).
TEST(CheckSpecTest, HostChecksRefuseWhatBubblewrapWouldFailOn) {
  RunSpec file_ws = Good();
  file_ws.workspace = "/etc/passwd";
  EXPECT_EQ(CheckSpecOnHost(file_ws).field, "workspace");
  EXPECT_THAT(CheckSpecStatus(file_ws), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckSpecStatus(file_ws),
              StatusHasMessage("workspace \"/etc/passwd\" is not a directory"));

  RunSpec file_broker = Good();
  file_broker.broker.address = "unix:/etc/passwd";
  EXPECT_EQ(CheckSpecOnHost(file_broker).field, "broker.address");
  EXPECT_THAT(CheckSpecStatus(file_broker),
              StatusHasMessage("broker \"/etc/passwd\" is not a socket"));

  // A broker not there is a broker down, for both: the run runs, its connections are refused.
  RunSpec down = Good();
  down.broker.address = "unix:/nonexistent-codespace-broker";
  EXPECT_TRUE(CheckSpecStatus(down).ok());
  RunSpec below_a_file = Good();
  below_a_file.broker.address = "unix:/etc/passwd/b.sock";
  EXPECT_EQ(CheckSpecOnHost(below_a_file).field, "broker.address");

  EXPECT_TRUE(CheckSpecStatus(Good()).ok());
}

// The Status carries the pure rule's message word for word.
TEST(CheckSpecTest, StatusSaysWhatTheSpecErrorSays) {
  RunSpec s = Good();
  s.env = {"B"};
  EXPECT_THAT(CheckSpecStatus(s), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(CheckSpecStatus(s).message(), CheckSpec(s).message);
}

}  // namespace
}  // namespace codespace
