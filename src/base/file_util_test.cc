#include "base/file_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;

TEST(FileUtilTest, WriteAtomicallyThenRead) {
  TempDir dir;
  std::string p = dir.path() + "/f";
  ASSERT_OK(WriteFileAtomically(p, "one"));
  ASSERT_OK(WriteFileAtomically(p, "two", 0600));
  EXPECT_EQ(*ReadFileToString(p), "two");
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // No temporary file is left beside it.
  EXPECT_NE(::access((p + ".tmp." + std::to_string(::getpid())).c_str(), F_OK), 0);
}

TEST(FileUtilTest, ReplaceForThisBootReplacesWholeAndLeavesNoTemporary) {
  TempDir dir;
  std::string p = dir.path() + "/f";
  ASSERT_OK(ReplaceFileForThisBoot(p, "one"));
  ASSERT_OK(ReplaceFileForThisBoot(p, "second", 0600));
  EXPECT_EQ(*ReadFileToString(p), "second");
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(::access((p + ".tmp." + std::to_string(::getpid())).c_str(), F_OK), 0);
  // A directory that is not there: the failure names the call, nothing is left.
  EXPECT_THAT(ReplaceFileForThisBoot(dir.path() + "/missing/f", "x"), StatusHasMessage("open("));
}

TEST(FileUtilTest, ReadMissingNamesThePath) {
  EXPECT_THAT(ReadFileToString("/nonexistent/x"),
              StatusHasMessage("open(/nonexistent/x): No such file or directory"));
  EXPECT_THAT(ReadFileToString("/nonexistent/x"), StatusIs(StatusCode::kNotFound));
}

TEST(FileUtilTest, MakeDirsAndRemoveTree) {
  TempDir dir;
  std::string deep = dir.path() + "/a/b/c";
  ASSERT_OK(MakeDirs(deep));
  ASSERT_OK(WriteFileAtomically(deep + "/f", "x"));
  ASSERT_OK(::symlink("/etc", (dir.path() + "/a/link").c_str()) == 0 ? OkStatus()
                                                                     : InternalError("symlink"));
  ASSERT_OK(RemoveTree(dir.path() + "/a"));
  EXPECT_NE(::access((dir.path() + "/a").c_str(), F_OK), 0);
  EXPECT_EQ(::access("/etc/passwd", F_OK), 0);  // the symlink was not followed
  EXPECT_OK(RemoveTree(dir.path() + "/missing"));
  ASSERT_OK(WriteFileAtomically(dir.path() + "/file", "x"));
  EXPECT_THAT(MakeDirs(dir.path() + "/file"), StatusHasMessage("not a directory"));
}

TEST(FileUtilTest, FindExecutableSearchesPathInOrder) {
  TempDir dir;
  ASSERT_OK(MakeDirs(dir.path() + "/one"));
  ASSERT_OK(MakeDirs(dir.path() + "/two"));
  ASSERT_OK(WriteFileAtomically(dir.path() + "/one/tool", "", 0644));  // not executable
  ASSERT_OK(WriteFileAtomically(dir.path() + "/two/tool", "", 0755));
  std::string path = dir.path() + "/one::" + dir.path() + "/two";
  EXPECT_EQ(*FindExecutable("tool", path), dir.path() + "/two/tool");
  EXPECT_THAT(FindExecutable("absent", path), StatusIs(StatusCode::kNotFound));
  EXPECT_EQ(*FindExecutable(dir.path() + "/two/tool", ""), dir.path() + "/two/tool");
  EXPECT_FALSE(FindExecutable(dir.path() + "/one/tool", "").ok());
  EXPECT_FALSE(FindExecutable(dir.path(), "").ok());  // a directory is not an executable
}

}  // namespace
}  // namespace codespace
