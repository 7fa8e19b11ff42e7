#include "identity/uid_lease.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file_util.h"
#include "base/testing/temp_dir.h"

namespace codespace {
namespace {

class UidLeaseTest : public ::testing::Test {
 protected:
  std::string lease_file() const { return dir_.path() + "/uid-leases"; }
  // An empty /proc: no process uses any uid.
  std::string no_procs() const { return dir_.path() + "/proc"; }
  void SetUp() override { ASSERT_TRUE(MakeDirs(no_procs(), 0755).ok()); }
  TempDir dir_;
};

TEST_F(UidLeaseTest, TwoLiveLeasesNeverShareAUid) {
  UidRange range{700000, 3};
  auto a = UidLease::Acquire(lease_file(), range, no_procs());
  auto b = UidLease::Acquire(lease_file(), range, no_procs());
  auto c = UidLease::Acquire(lease_file(), range, no_procs());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->uid(), 700000u);
  EXPECT_EQ(b->uid(), 700001u);
  EXPECT_EQ(c->uid(), 700002u);
  auto d = UidLease::Acquire(lease_file(), range, no_procs());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(UidLease::Held(lease_file(), range, 700001));
}

TEST_F(UidLeaseTest, AReleasedUidIsLeasedAgain) {
  UidRange range{700000, 2};
  {
    auto a = UidLease::Acquire(lease_file(), range, no_procs());
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->uid(), 700000u);
  }
  EXPECT_FALSE(UidLease::Held(lease_file(), range, 700000));
  auto again = UidLease::Acquire(lease_file(), range, no_procs());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->uid(), 700000u);
}

TEST_F(UidLeaseTest, AnotherProcessLeaseIsHeldUntilItDies) {
  UidRange range{700000, 2};
  Result<Pipe> p = MakePipe();
  ASSERT_TRUE(p.ok());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto mine = UidLease::Acquire(lease_file(), range, no_procs());
    char c = mine.ok() && mine->uid() == 700000 ? 'y' : 'n';
    (void)!::write(p->write.get(), &c, 1);
    ::pause();  // killed: the kernel releases the lease, no one else does
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(p->read.get(), &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto second = UidLease::Acquire(lease_file(), range, no_procs());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->uid(), 700001u) << "a live process's uid was leased again";
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_FALSE(UidLease::Held(lease_file(), range, 700000)) << "a dead holder kept its lease";
  auto third = UidLease::Acquire(lease_file(), range, no_procs());
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->uid(), 700000u);
}

TEST_F(UidLeaseTest, AUidAProcessStillRunsAsIsSkipped) {
  UidRange range{700000, 2};
  // A fake /proc: pid 42 runs with saved uid 700000 (a stranded sandbox whose lease is gone).
  ASSERT_TRUE(MakeDirs(no_procs() + "/42", 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(no_procs() + "/42/status",
                                  "Name:\tx\nUid:\t5\t5\t700000\t5\nGid:\t5\t5\t5\t5\n")
                  .ok());
  auto a = UidLease::Acquire(lease_file(), range, no_procs());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->uid(), 700001u);
  EXPECT_EQ(LiveIds(no_procs()), (std::set<uint32_t>{5, 700000}));
}

TEST(LiveIdsTest, SeesThisProcess) { EXPECT_TRUE(LiveIds("/proc").count(::geteuid())); }

}  // namespace
}  // namespace codespace
