#include "supervisor/log_file.h"

#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"

namespace codespace {
namespace {

TEST(FileLogSinkTest, DigestIsOfExactlyTheBytesWrittenAndTheFileIsSealed) {
  TempDir dir;
  std::string path = dir.path() + "/stdout";
  auto sink = FileLogSink::Create(path);
  ASSERT_OK(sink);
  std::string all;
  for (int i = 0; i < 1000; ++i) {
    std::string chunk = "line " + std::to_string(i) + "\n";
    ASSERT_OK((*sink)->Write(chunk.data(), chunk.size()));
    all += chunk;
  }
  auto d = (*sink)->Seal();
  ASSERT_OK(d);
  EXPECT_TRUE(d->sealed);
  EXPECT_EQ(d->bytes, all.size());
  EXPECT_EQ(d->sha256, Sha256Hex(all));
  EXPECT_EQ(*Sha256OfFile(path), d->sha256);
  EXPECT_EQ(*ReadFileToString(path), all);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u) << "a sealed log is read-only";
  EXPECT_FALSE((*sink)->Write("x", 1).ok());
  EXPECT_FALSE((*sink)->Seal().ok());
}

TEST(FileLogSinkTest, EmptyLogSealsWithTheEmptyDigest) {
  TempDir dir;
  auto sink = FileLogSink::Create(dir.path() + "/stderr");
  ASSERT_OK(sink);
  auto d = (*sink)->Seal();
  ASSERT_OK(d);
  EXPECT_EQ(d->bytes, 0u);
  EXPECT_EQ(d->sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace codespace
