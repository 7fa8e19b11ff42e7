#include "identity/uid_range.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace codespace {
namespace {

using ::testing::HasSubstr;

TEST(ParseUidRangeTest, Table) {
  struct Case {
    const char* text;
    bool ok;
    UidRange want;
  } cases[] = {
      {"600000-665535", true, {600000, 65536}},
      {"70000-70000", true, {70000, 1}},
      {"1-2", true, {1, 2}},
      {"0-10", false, {}},          // root
      {"10-5", false, {}},          // reversed
      {"60000-70000", false, {}},   // holds 65535
      {"1-4294967295", false, {}},  // holds (uid_t)-1
      {"600000", false, {}},        // no dash
      {"-5", false, {}},
      {"5-", false, {}},
      {"a-b", false, {}},
      {"5-6x", false, {}},
      {"", false, {}},
  };
  for (const Case& c : cases) {
    auto r = ParseUidRange(c.text);
    EXPECT_EQ(r.ok(), c.ok) << c.text;
    if (r.ok() && c.ok) {
      EXPECT_EQ(*r, c.want) << c.text;
    }
    if (!r.ok()) {
      EXPECT_THAT(r.status().message(), HasSubstr("CODESPACE_RUN_UIDS")) << c.text;
    }
  }
}

TEST(UidRangeTest, ContainsIsInclusive) {
  UidRange r{600000, 10};
  EXPECT_FALSE(r.Contains(599999));
  EXPECT_TRUE(r.Contains(600000));
  EXPECT_TRUE(r.Contains(600009));
  EXPECT_FALSE(r.Contains(600010));
  EXPECT_EQ(r.ToString(), "600000-600009");
}

TEST(CheckRangeFreeTest, NamesTheFirstOverlappingAccount) {
  UidRange r{600000, 100};
  std::vector<AccountId> users = {{"root", 0}, {"alice", 1000}};
  std::vector<AccountId> groups = {{"root", 0}, {"users", 100}};
  EXPECT_TRUE(CheckRangeFree(r, users, groups).ok());
  users.push_back({"mallory", 600050});
  Status s = CheckRangeFree(r, users, groups);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("user \"mallory\" (id 600050)"));
  users.pop_back();
  groups.push_back({"staff", 600099});
  s = CheckRangeFree(r, users, groups);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("group \"staff\" (id 600099)"));
  groups.back().id = 600100;  // just past the end
  EXPECT_TRUE(CheckRangeFree(r, users, groups).ok());
}

TEST(CheckRangeFreeTest, TheDefaultRangeIsFreeOnThisHost) {
  std::vector<AccountId> users, groups;
  AccountIds(&users, &groups);
  ASSERT_FALSE(users.empty());  // root at least
  auto range = ParseUidRange(kDefaultRunUids);
  ASSERT_TRUE(range.ok());
  EXPECT_TRUE(CheckRangeFree(*range, users, groups).ok());
  // And root's own uid would be refused in any range holding it.
  EXPECT_FALSE(CheckRangeFree(UidRange{0, 10}, users, groups).ok());
}

TEST(RangeIsMappedTest, Table) {
  UidRange r{600000, 65536};
  EXPECT_TRUE(RangeIsMapped(r, "         0          0 4294967295\n"));   // the initial namespace
  EXPECT_FALSE(RangeIsMapped(r, "         0       1654          1\n"));  // a rootless root
  EXPECT_TRUE(RangeIsMapped(r, "0 1654 1\n1 100000 700000\n"));
  EXPECT_FALSE(RangeIsMapped(r, "0 0 665535\n"));  // one short
  EXPECT_TRUE(RangeIsMapped(r, "600000 0 65536\n"));
  EXPECT_FALSE(RangeIsMapped(r, ""));
}

TEST(RunUidRangeFromEnvironmentTest, ARangeHoldingSystemAccountsIsRefused) {
  const char* before = std::getenv(kRunUidsEnv);
  std::string saved = before ? before : "";
  ::setenv(kRunUidsEnv, "1-100", 1);  // daemon, bin, sys... on every Debian host
  auto r = RunUidRangeFromEnvironment();
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("overlaps the"));
  ::setenv(kRunUidsEnv, kDefaultRunUids, 1);
  EXPECT_TRUE(RunUidRangeFromEnvironment().ok());
  if (before) {
    ::setenv(kRunUidsEnv, saved.c_str(), 1);
  } else {
    ::unsetenv(kRunUidsEnv);
  }
}

// A root that holds what the launch needs has no complaint; one without CAP_SYS_ADMIN (a
// container's root) is named, so the worker refuses rather than run commands as uid 0.
TEST(PerRunIdentityCapabilityErrorTest, NamesTheMissingCapability) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (the capabilities of uid 0)";
  EXPECT_EQ(PerRunIdentityCapabilityError(), "");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (::syscall(SYS_capget, &hdr, data) != 0) ::_exit(2);
    data[0].effective &= ~(1u << CAP_SYS_ADMIN);
    if (::syscall(SYS_capset, &hdr, data) != 0) ::_exit(3);
    std::string why = PerRunIdentityCapabilityError();
    ssize_t n = ::write(fds[1], why.data(), why.size());
    ::_exit(n == static_cast<ssize_t>(why.size()) ? 0 : 4);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;)
    got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_THAT(got, ::testing::HasSubstr("without CAP_SYS_ADMIN"));
}

}  // namespace
}  // namespace codespace
