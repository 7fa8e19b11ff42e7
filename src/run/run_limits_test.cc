#include "run/run_limits.h"

#include <gtest/gtest.h>

namespace codespace {
namespace {

TEST(ParseByteSize, SuffixesArePowersOf1024) {
  struct Case {
    const char* text;
    uint64_t bytes;
  } cases[] = {
      {"1", 1},
      {"1048576", 1048576},
      {"64k", 64 * 1024},
      {"64K", 64 * 1024},
      {"512M", 512ull << 20},
      {"512MiB", 512ull << 20},
      {"512MB", 512ull << 20},
      {"2G", 2ull << 30},
      {"2g", 2ull << 30},
      {"1.5G", 3ull << 29},
      {"0.5M", 512 * 1024},
      {"1T", 1ull << 40},
  };
  for (const Case& c : cases) {
    auto got = ParseByteSize(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status().message();
    EXPECT_EQ(*got, c.bytes) << c.text;
  }
}

TEST(ParseByteSize, RefusesWhatIsNotASize) {
  for (const char* text : {"", "G", "-1", "1.5", "0", "0M", "2X", "1..5G", "1.G", " 2G", "2G ",
                           "99999999999T", "1e9", "0x10"}) {
    EXPECT_FALSE(ParseByteSize(text).ok()) << text;
  }
}

TEST(ParseCpus, FractionsOfACoreInThousandths) {
  EXPECT_EQ(*ParseCpus("1.5"), 1500u);
  EXPECT_EQ(*ParseCpus("2"), 2000u);
  EXPECT_EQ(*ParseCpus("0.25"), 250u);
  EXPECT_EQ(*ParseCpus("0.5"), 500u);
  EXPECT_EQ(*ParseCpus("0.01"), 10u);
  for (const char* text : {"", "0", "0.001", "-1", "1.2345", "one", "1.5x", ".5"}) {
    EXPECT_FALSE(ParseCpus(text).ok()) << text;
  }
}

TEST(ParseCount, PositiveWholeNumbers) {
  EXPECT_EQ(*ParseCount("512"), 512u);
  for (const char* text : {"", "0", "-3", "1.5", "12k"})
    EXPECT_FALSE(ParseCount(text).ok()) << text;
}

TEST(FormatBytes, ReadsAsAnOperatorWritesIt) {
  EXPECT_EQ(FormatBytes(512ull << 20), "512 MiB");
  EXPECT_EQ(FormatBytes(3ull << 29), "1.5 GiB");
  EXPECT_EQ(FormatBytes(100), "100 bytes");
  EXPECT_EQ(FormatCpus(1500), "1.5");
  EXPECT_EQ(FormatCpus(2000), "2");
  EXPECT_EQ(FormatCpus(250), "0.25");
}

TEST(DescribeLimits, NamesEverySetLimit) {
  RunLimits l;
  EXPECT_EQ(DescribeLimits(l), "none");
  EXPECT_TRUE(l.empty());
  l.memory_bytes = 512ull << 20;
  l.pids = 64;
  l.cpu_millis = 1500;
  l.tmp_bytes = 64ull << 20;
  l.nofile = 1024;
  EXPECT_EQ(DescribeLimits(l), "memory=512 MiB pids=64 cpus=1.5 tmp=64 MiB nofile=1024");
  EXPECT_TRUE(l.needs_cgroup());
  RunLimits only_tmp;
  only_tmp.tmp_bytes = 1;
  EXPECT_FALSE(only_tmp.needs_cgroup());
  EXPECT_FALSE(only_tmp.empty());
}

}  // namespace
}  // namespace codespace
