#include "base/status.h"

#include <cerrno>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;

TEST(StatusTest, ErrnoErrorNamesTheCallAndErrnoText) {
  Status s = ErrnoError("setns(/run/netns/cs-1a2b3c, CLONE_NEWNET)", EPERM);
  EXPECT_EQ(s.message(), "setns(/run/netns/cs-1a2b3c, CLONE_NEWNET): Operation not permitted");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoError("open(x)", ENOENT).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoError("mkdir(x)", EEXIST).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrnoError("read", EIO).code(), StatusCode::kInternal);
}

TEST(StatusTest, WithContextPrefixesAndKeepsOk) {
  EXPECT_TRUE(OkStatus().WithContext("x").ok());
  EXPECT_EQ(InternalError("boom").WithContext("step").message(), "step: boom");
  EXPECT_EQ(InternalError("boom").ToString(), "INTERNAL: boom");
}

Result<int> Half(int x) {
  if (x % 2) return InvalidArgumentError(fmt::format("{} is odd", x));
  return x / 2;
}

Result<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x));
  return OkStatus();
}

TEST(ResultTest, MacrosPropagateTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_THAT(Quarter(6), StatusHasMessage("3 is odd"));
  EXPECT_THAT(Quarter(5), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_OK(CheckEven(4));
  EXPECT_THAT(CheckEven(3), StatusHasMessage("3 is odd"));
}

TEST(ResultTest, ResultFromOkStatusIsAnError) {
  Result<int> r{OkStatus()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace codespace
