#include "base/quote.h"

#include <gtest/gtest.h>

namespace codespace {
namespace {

TEST(QuoteForLineTest, EscapesQuotesAndBackslashesAndFoldsNewlines) {
  EXPECT_EQ(QuoteForLine(""), "\"\"");
  EXPECT_EQ(QuoteForLine("plain words"), "\"plain words\"");
  EXPECT_EQ(QuoteForLine("a \"b\" c"), "\"a \\\"b\\\" c\"");
  EXPECT_EQ(QuoteForLine("C:\\x"), "\"C:\\\\x\"");
  EXPECT_EQ(QuoteForLine("one\ntwo"), "\"one two\"");
}

}  // namespace
}  // namespace codespace
