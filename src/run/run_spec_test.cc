#include "run/run_spec.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace codespace {
namespace {

TEST(NewRunIdTest, IsSixteenLowerCaseHexDigits) {
  for (int i = 0; i < 1000; ++i) {
    const std::string id = NewRunId();
    ASSERT_EQ(id.size(), 16u) << id;
    for (char c : id) {
      ASSERT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << id;
    }
    ASSERT_TRUE(IsValidRunId(id)) << id;
  }
}

TEST(NewRunIdTest, IdsAreDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(seen.insert(NewRunId()).second);
}

// 16,000 random digits: every one of the 16 values shows up unless the generator is broken (the
// chance that a fair source misses one is below 1e-400), and no position is stuck.
TEST(NewRunIdTest, UsesEveryDigitInEveryPosition) {
  std::set<char> digits;
  std::array<std::set<char>, 16> per_position;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = NewRunId();
    for (size_t p = 0; p < id.size(); ++p) {
      digits.insert(id[p]);
      per_position[p].insert(id[p]);
    }
  }
  EXPECT_EQ(digits.size(), 16u);
  for (size_t p = 0; p < per_position.size(); ++p) {
    EXPECT_GT(per_position[p].size(), 8u) << "position " << p;
  }
}

struct RunIdCase {
  std::string id;
  bool valid;
};

void PrintTo(const RunIdCase& c, std::ostream* os) { *os << '"' << c.id << '"'; }

class IsValidRunIdTest : public ::testing::TestWithParam<RunIdCase> {};

TEST_P(IsValidRunIdTest, Checks) { EXPECT_EQ(IsValidRunId(GetParam().id), GetParam().valid); }

INSTANTIATE_TEST_SUITE_P(Table, IsValidRunIdTest,
                         ::testing::ValuesIn(std::vector<RunIdCase>{
                             {"0123456789abcdef", true},
                             {"0000000000000000", true},
                             {"ffffffffffffffff", true},
                             {"1a2b3c4d5e6f7a8b", true},
                             {"", false},
                             {"0123456789abcde", false},    // 15
                             {"0123456789abcdef0", false},  // 17
                             {"0123456789ABCDEF", false},   // upper case
                             {"0123456789abcdeF", false},
                             {"0123456789abcdeg", false},
                             {"0123456789abcde-", false},
                             {" 123456789abcdef", false},
                             {"0123456789abcde ", false},
                             {"0123456789abcde\n", false},
                             {"0x23456789abcdef", false},
                             {std::string("0123456789abcde\0", 16), false},
                             {"../../etc/passwd", false},
                             {"0123456789abcd\xc3\xa9", false},
                         }));

TEST(RunSpecTest, EqualityComparesEveryField) {
  RunSpec a;
  a.argv = {"/bin/true"};
  a.env = {"PATH=/usr/bin:/bin"};
  a.workspace = "/work/ws";
  a.egress = EgressPolicy{SandboxEgressPolicy::kNone, {}};
  a.timeout = std::chrono::seconds(30);
  EXPECT_EQ(a, a);

  RunSpec b = a;
  b.argv.push_back("x");
  EXPECT_NE(a, b);
  b = a;
  b.env.clear();
  EXPECT_NE(a, b);
  b = a;
  b.workspace = "/work/other";
  EXPECT_NE(a, b);
  b = a;
  b.egress.mode = SandboxEgressPolicy::kOpen;
  EXPECT_NE(a, b);
  b = a;
  b.timeout = std::chrono::seconds(31);
  EXPECT_NE(a, b);
  EXPECT_EQ(RunSpec{}.timeout, std::chrono::seconds(0));
  EXPECT_EQ(RunSpec{}.egress.mode, SandboxEgressPolicy::kNone);
}

}  // namespace
}  // namespace codespace
