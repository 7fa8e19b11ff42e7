#include "run/run_labels.h"

#include <gtest/gtest.h>

namespace codespace {
namespace {

TEST(CheckRunNameTest, Table) {
  for (const char* ok : {"a", "fix-tests", "agent_1.2", "A9", "0123456789abcde"}) {
    EXPECT_TRUE(CheckRunName(ok).ok()) << ok;
  }
  for (const char* bad : {"", "-x", ".x", "has space", "sl/ash", "latest", "0123456789abcdef", "ü",
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    EXPECT_FALSE(CheckRunName(bad).ok()) << bad;
  }
}

TEST(CheckIdempotencyKeyTest, Table) {
  for (const char* ok : {"k", "cs-0123456789abcdef", "a:b/c=d"}) {
    EXPECT_TRUE(CheckIdempotencyKey(ok).ok()) << ok;
  }
  for (const char* bad : {"", "with space", "tab\there", "nl\n"}) {
    EXPECT_FALSE(CheckIdempotencyKey(bad).ok()) << bad;
  }
  EXPECT_FALSE(CheckIdempotencyKey(std::string(256, 'k')).ok());
}

}  // namespace
}  // namespace codespace
