#include "cli/cli_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace codespace {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(EffectiveEgressTest, AllowImpliesAllowlistOnlyWhenNoEgressWasGiven) {
  struct Case {
    std::string given;
    std::vector<std::string> allow;
    std::string want;
  };
  for (const auto& c : std::vector<Case>{
           {"", {}, "none"},
           {"", {"example.com"}, "allowlist"},
           {"none", {"example.com"}, "none"},  // explicit: stays (and MakeEgressPolicy refuses)
           {"open", {"example.com"}, "open"},
           {"allowlist", {"example.com"}, "allowlist"},
           {"open", {}, "open"},
       }) {
    EXPECT_EQ(EffectiveEgress(c.given, c.allow), c.want) << c.given;
  }
}

TEST(UnexpectedArgumentsMessageTest, NamesTheFlagOrCommandAndPointsToHelp) {
  struct Case {
    std::string command;
    bool top;
    std::vector<std::string> remaining;
    std::string want;
  };
  for (const auto& c : std::vector<Case>{
           {"codespace run", false, {"--", "--frobnicate"}, "unknown flag --frobnicate"},
           {"codespace run", false, {"--name", "x", "true"}, "unknown flag --name"},
           {"codespace", true, {"frob"}, "unknown command \"frob\""},
           {"codespace show", false, {"a", "b"}, "unexpected argument \"a\""},
       }) {
    std::string m = UnexpectedArgumentsMessage(c.command, c.top, c.remaining);
    EXPECT_THAT(m, HasSubstr(c.want)) << m;
    EXPECT_THAT(m, HasSubstr("see `" + c.command + " --help`")) << m;
    EXPECT_THAT(m, Not(HasSubstr("-- --"))) << m;
  }
}

TEST(ParseEnvFileTest, SkipsBlankAndCommentLinesAndNamesABadLine) {
  auto ok = ParseEnvFile("# comment\nA=1\n\n  \nB=two words\r\nC=\n", "f");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, (std::vector<std::string>{"A=1", "B=two words", "C="}));
  auto bad = ParseEnvFile("A=1\nnot a pair\n", "f");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--env-file f: line 2: expected KEY=VALUE"));
  EXPECT_FALSE(ParseEnvFile("=x\n", "f").ok());
}

TEST(OneLineTest, EscapesWhatWouldBreakALine) {
  EXPECT_EQ(OneLine("echo a\nb"), "echo a\\nb");
  EXPECT_EQ(OneLine("a\tb\rc"), "a\\tb\\rc");
  EXPECT_EQ(OneLine(std::string("x\x1by", 3)), "x\\x1by");
  EXPECT_EQ(OneLine("plain"), "plain");
}

}  // namespace
}  // namespace codespace
