// gmock matchers for Status and Result<T>, written once for every test.
#pragma once

#include <gmock/gmock.h>

#include "base/status.h"

namespace codespace::testing {

inline const Status& GetStatus(const Status& s) { return s; }
template <typename T>
Status GetStatus(const Result<T>& r) {
  return r.status();
}

MATCHER(IsOk, "is OK") {
  auto s = GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s.ToString();
  return s.ok();
}

MATCHER_P(StatusIs, code, "has status code " + std::string(StatusCodeName(code))) {
  auto s = GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code;
}

// The error message contains `substr`.
MATCHER_P(StatusHasMessage, substr, "has an error message containing \"" + std::string(substr) + "\"") {
  auto s = GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return !s.ok() && s.message().find(substr) != std::string::npos;
}

}  // namespace codespace::testing

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::codespace::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::codespace::testing::IsOk())
