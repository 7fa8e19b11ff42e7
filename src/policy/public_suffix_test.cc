#include "policy/public_suffix.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace codespace {
namespace {

using ::testing::HasSubstr;

// A small list in the real format: both sections, a wildcard rule and its exception.
constexpr char kList[] = R"(// comment
// ===BEGIN ICANN DOMAINS===
com
uk
co.uk
// a comment line
*.ck
!www.ck
JP
// ===END ICANN DOMAINS===
// ===BEGIN PRIVATE DOMAINS===
githubusercontent.com
github.io
// ===END PRIVATE DOMAINS===
)";

TEST(PublicSuffixListTest, Table) {
  PublicSuffixList l = PublicSuffixList::Parse(kList);
  struct Case {
    const char* name;
    bool suffix;
  };
  for (const Case& c : std::vector<Case>{
           {"com", true},
           {"co.uk", true},
           {"jp", true},
           {"example.com", false},
           {"example.co.uk", false},
           {"anything.ck", true},  // under the wildcard rule
           {"www.ck", false},      // its exception
           {"a.b.ck", false},
           {"org", true},                     // a single label is always a suffix, listed or not
           {"githubusercontent.com", false},  // PRIVATE: a wildcard there is meant
           {"github.io", false},
       }) {
    EXPECT_EQ(l.IsPublicSuffix(c.name), c.suffix) << c.name;
  }
}

TEST(CheckWildcardNotPublicSuffixTest, RefusesWildcardsOverPublicSuffixesOnly) {
  PublicSuffixList l = PublicSuffixList::Parse(kList);
  auto check = [&](const char* text) {
    auto e = ParseAllowlistEntry(text);
    EXPECT_TRUE(e.ok()) << text;
    return CheckWildcardNotPublicSuffix(*e, l);
  };
  for (const char* bad : {"*.com", "*.co.uk", "*.x.ck", "*.org:443"}) {
    Status s = check(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_THAT(s.message(), HasSubstr("is a public suffix")) << bad;
  }
  for (const char* ok :
       {"*.example.com", "*.example.co.uk", "com.example.org", "*.githubusercontent.com",
        "api.anthropic.com:443", "203.0.113.0/24", "*.www.ck"}) {
    EXPECT_TRUE(check(ok).ok()) << ok;
  }
}

TEST(PublicSuffixListTest, EmptyListStillRefusesSingleLabels) {
  PublicSuffixList l = PublicSuffixList::Parse("");
  EXPECT_TRUE(l.IsPublicSuffix("com"));
  EXPECT_FALSE(l.IsPublicSuffix("co.uk"));  // unknown without the list
}

TEST(PublicSuffixListTest, DebiansListParses) {
  // The real file the Makefile installs (publicsuffix); the ICANN section has thousands.
  std::ifstream in(kPublicSuffixListPath);
  if (!in) GTEST_SKIP() << kPublicSuffixListPath << " missing (apt-get install publicsuffix)";
  std::stringstream text;
  text << in.rdbuf();
  PublicSuffixList l = PublicSuffixList::Parse(text.str());
  EXPECT_GT(l.size(), 5000u);
  EXPECT_TRUE(l.IsPublicSuffix("co.uk"));
  EXPECT_FALSE(l.IsPublicSuffix("githubusercontent.com"));
  EXPECT_FALSE(l.IsPublicSuffix("anthropic.com"));
}

}  // namespace
}  // namespace codespace
