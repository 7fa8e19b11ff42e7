#include "identity/run_identity.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file_util.h"
#include "base/testing/temp_dir.h"

namespace codespace {
namespace {

using ::testing::HasSubstr;

TEST(IdMapLineTest, OnDiskThenShownAs) { EXPECT_EQ(IdMapLine(0, 600000), "0 600000 1\n"); }

TEST(FilesystemTypeOfTest, ProcIsProc) {
  EXPECT_EQ(FilesystemTypeOf("/proc/self"), "proc");
  EXPECT_EQ(FilesystemTypeOf("/nonexistent/path"), "unknown");
}

class RunIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "leases dirs owned by the run's uid: needs root";
    // The run's uid must traverse to the mount point (a mkdtemp dir is 0700).
    ASSERT_EQ(::chmod(root_.path().c_str(), 0755), 0);
    ASSERT_TRUE(MakeDirs(root_.path() + "/proc", 0755).ok());
    ASSERT_TRUE(MakeDirs(root_.path() + "/ws-src", 0755).ok());
  }
  RunIdentityOptions Options() const {
    RunIdentityOptions o;
    o.run_root = root_.path() + "/run";
    o.range = UidRange{710000, 4};
    o.workspace = root_.path() + "/ws-src";
    o.proc_dir = root_.path() + "/proc";
    return o;
  }
  TempDir root_;
};

TEST_F(RunIdentityTest, LeaseDirIsMadeAndRemoved) {
  std::string dir;
  {
    auto id = RunIdentity::Prepare(Options());
    ASSERT_TRUE(id.ok()) << id.status().message();
    dir = (*id)->dir();
    EXPECT_EQ((*id)->uid(), 710000u);
    EXPECT_GE((*id)->workspace_mount_fd(), 0);
    struct stat st {};
    ASSERT_EQ(::stat((*id)->relay_dir().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 710000u);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_mode & 07777, 0711u);
  }
  EXPECT_NE(::access(dir.c_str(), F_OK), 0) << dir << " outlived its lease";
}

TEST_F(RunIdentityTest, ACrashedHoldersDirIsReplaced) {
  RunIdentityOptions o = Options();
  ASSERT_TRUE(MakeDirs(o.run_root + "/ws/710000/relay", 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(o.run_root + "/ws/710000/relay/stale.sock", "x").ok());
  auto id = RunIdentity::Prepare(o);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_NE(::access((o.run_root + "/ws/710000/relay/stale.sock").c_str(), F_OK), 0);
}

// The idmapped clone, attached in a mount namespace of a child's own: the owner's file shows
// as the run's uid, and a file the run's uid creates lands on disk as the owner's.
TEST_F(RunIdentityTest, IdmappedCloneMapsOwnerToRunUid) {
  RunIdentityOptions o = Options();
  ASSERT_TRUE(WriteFileAtomically(o.workspace + "/owned", "x").ok());
  auto id = RunIdentity::Prepare(o);
  ASSERT_TRUE(id.ok()) << id.status().message();
  const std::string target = (*id)->workspace_mount_point();
  const uid_t run_uid = (*id)->uid();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0) ::_exit(10);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) ::_exit(11);
    if (::move_mount((*id)->workspace_mount_fd(), "", AT_FDCWD, target.c_str(),
                     MOVE_MOUNT_F_EMPTY_PATH) != 0) {
      ::_exit(12);
    }
    struct stat st {};
    if (::stat((target + "/owned").c_str(), &st) != 0 || st.st_uid != run_uid) ::_exit(13);
    if (::setresgid(run_uid, run_uid, run_uid) != 0 || ::setresuid(run_uid, run_uid, run_uid) != 0)
      ::_exit(14);
    int fd = ::open((target + "/made").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) ::_exit(15);
    ::close(fd);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "step that failed: see the exit codes above";
  struct stat st {};
  ASSERT_EQ(::stat((o.workspace + "/made").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "a file the run made is not the workspace owner's on disk";
  // Nothing of the mount is left in this namespace.
  EXPECT_NE(::access((target + "/owned").c_str(), F_OK), 0);
}

TEST_F(RunIdentityTest, AFilesystemThatCannotBeIdmappedIsNamed) {
  RunIdentityOptions o = Options();
  o.workspace = "/proc/self";  // procfs supports no idmapped mounts
  auto id = RunIdentity::Prepare(o);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr("is on proc"));
}

}  // namespace
}  // namespace codespace
