#include "cli/log_follow.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "base/unique_fd.h"

namespace codespace {
namespace {

Status Append(const std::string& path, std::string_view data) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0640));
  return WriteAll(fd.get(), data);
}

std::string Drain(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Two growing logs to two pipes (sendfile's way): each byte once, in order, as it comes.
TEST(LogFollowerTest, CopiesWhatIsNewAsTheFilesGrow) {
  TempDir dir;
  std::string out_path = dir.path() + "/stdout", err_path = dir.path() + "/stderr";
  auto out = MakePipe(O_NONBLOCK);
  auto err = MakePipe(O_NONBLOCK);
  ASSERT_OK(out);
  ASSERT_OK(err);
  LogFollower follow(out_path, err_path, out->write.get(), err->write.get());
  EXPECT_EQ(follow.Pump(), 0u) << "no files yet";
  ASSERT_OK(Append(out_path, "one\n"));
  EXPECT_EQ(follow.Pump(), 4u);
  ASSERT_OK(Append(out_path, "two\n"));
  ASSERT_OK(Append(err_path, "warning\n"));
  EXPECT_EQ(follow.Pump(), 12u);
  EXPECT_EQ(follow.Pump(), 0u);
  EXPECT_EQ(Drain(out->read.get()), "one\ntwo\n");
  EXPECT_EQ(Drain(err->read.get()), "warning\n");
}

// A target that is full (a non-blocking pipe nobody reads yet) gets the rest later: nothing is
// dropped, nothing sent twice.
TEST(LogFollowerTest, AFullTargetGetsTheRestLater) {
  TempDir dir;
  std::string out_path = dir.path() + "/stdout", err_path = dir.path() + "/stderr";
  std::string all;
  for (int i = 0; i < 300000; ++i) all += static_cast<char>('a' + i % 23);
  ASSERT_OK(Append(out_path, all));
  auto out = MakePipe(O_NONBLOCK);
  ASSERT_OK(out);
  auto null = OpenFile("/dev/null", O_WRONLY);
  ASSERT_OK(null);
  LogFollower follow(out_path, err_path, out->write.get(), null->get());
  std::string got;
  size_t copied = 0;
  for (int round = 0; round < 100 && got.size() < all.size(); ++round) {
    copied += follow.Pump();
    got += Drain(out->read.get());
  }
  EXPECT_EQ(copied, all.size());
  EXPECT_EQ(got, all);
}

// A target sendfile refuses (a file opened O_APPEND) gets read and write instead.
TEST(LogFollowerTest, ATargetWithoutSendfileGetsEveryByteToo) {
  TempDir dir;
  std::string out_path = dir.path() + "/stdout", err_path = dir.path() + "/stderr";
  std::string target = dir.path() + "/terminal";
  auto t = OpenFile(target.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0640);
  ASSERT_OK(t);
  auto null = OpenFile("/dev/null", O_WRONLY);
  ASSERT_OK(null);
  LogFollower follow(out_path, err_path, t->get(), null->get());
  std::string all;
  for (int i = 0; i < 50; ++i) {
    std::string piece(static_cast<size_t>(i) * 3001 + 1, static_cast<char>('a' + i % 26));
    ASSERT_OK(Append(out_path, piece));
    all += piece;
    EXPECT_EQ(follow.Pump(), piece.size());
  }
  EXPECT_EQ(*ReadFileToString(target), all);
}

}  // namespace
}  // namespace codespace
