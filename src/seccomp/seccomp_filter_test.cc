#include "seccomp/seccomp_filter.h"

#include <errno.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "base/testing/status_matchers.h"
#include "seccomp/bpf_install.h"

namespace codespace {
namespace {

// Runs `body` in a forked child under `bpf`; its wait status.
int UnderFilter(const std::string& bpf, const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (InstallBpfFilter(bpf.data(), bpf.size()) != 0) _exit(90);
    _exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

int ExitCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

TEST(CompileSeccompBpfTest, CompilesWholeInstructionsWithinTheKernelLimit) {
  for (bool trace : {false, true}) {
    auto bpf = CompileSeccompBpf({trace});
    ASSERT_TRUE(bpf.ok()) << bpf.status().message();
    EXPECT_EQ(bpf->size() % sizeof(sock_filter), 0u);
    EXPECT_LE(bpf->size() / sizeof(sock_filter), 4096u);  // BPF_MAXINSNS
  }
  EXPECT_EQ(SeccompUnavailableReason(), "");
}

TEST(CompileSeccompBpfTest, LoadedItDeniesAndAllows) {
  auto bpf = CompileSeccompBpf({});
  ASSERT_TRUE(bpf.ok()) << bpf.status().message();
  EXPECT_EQ(ExitCode(UnderFilter(*bpf,
                                 [] {
                                   errno = 0;
                                   long rc = ::syscall(SYS_io_uring_setup, 0, nullptr);
                                   return rc == -1 && errno == ENOSYS ? 0 : 1;
                                 })),
            0);
  EXPECT_EQ(ExitCode(UnderFilter(
                *bpf, [] { return ::syscall(SYS_unshare, 0) == -1 && errno == EPERM ? 0 : 1; })),
            0);
  EXPECT_EQ(ExitCode(UnderFilter(*bpf, [] { return ::getpid() > 0 ? 0 : 1; })), 0);
}

#if defined(__x86_64__)
// The two other entry points of an x86_64 kernel: neither reaches the table's numbers.
TEST(CompileSeccompBpfTest, NonNativeAbisKillTheProcess) {
  auto bpf = CompileSeccompBpf({});
  ASSERT_TRUE(bpf.ok()) << bpf.status().message();
  int st = UnderFilter(*bpf, [] {
    long ret = 20;  // i386 getpid
    asm volatile("int $0x80" : "+a"(ret) : : "memory");
    return 0;
  });
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) << st;
  st = UnderFilter(*bpf, [] {
    ::syscall(0x40000000 | SYS_getpid);  // x32 getpid
    return 0;
  });
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) << st;
}
#endif

TEST(SeccompBpfFdTest, ReadableFromTheStartAndSealed) {
  auto fd = SeccompBpfFd("12345678");
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  auto text = ReadAll(fd->get());
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "12345678");
  EXPECT_EQ(::write(fd->get(), "x", 1), -1);
  EXPECT_EQ(errno, EPERM);
}

}  // namespace
}  // namespace codespace
