#include "seccomp/syscall_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <map>
#include <random>
#include <set>

namespace codespace {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;
using Args = std::array<uint64_t, 6>;

std::optional<int> Answer(std::string_view syscall, Args args = {}, SeccompOptions o = {}) {
  static const auto* kPlain = new std::vector<FilterRule>(ExpandPolicy(SyscallPolicyRows({})));
  static const auto* kTrace =
      new std::vector<FilterRule>(ExpandPolicy(SyscallPolicyRows({.allow_ptrace = true})));
  return EvaluateRules(o.allow_ptrace ? *kTrace : *kPlain, syscall, args);
}

// Every syscall the issue names is denied outright, with the errno the table chose.
TEST(SyscallPolicyTest, DeniedOutrightWithTheirErrno) {
  const std::pair<const char*, int> denied[] = {
      {"io_uring_setup", ENOSYS},
      {"io_uring_enter", ENOSYS},
      {"io_uring_register", ENOSYS},
      {"userfaultfd", ENOSYS},
      {"clone3", ENOSYS},
      {"openat2", ENOSYS},
      {"add_key", ENOSYS},
      {"keyctl", ENOSYS},
      {"request_key", ENOSYS},
      {"bpf", EPERM},
      {"perf_event_open", EPERM},
      {"kexec_load", EPERM},
      {"kexec_file_load", EPERM},
      {"init_module", EPERM},
      {"finit_module", EPERM},
      {"delete_module", EPERM},
      {"open_by_handle_at", EPERM},
      {"mount", EPERM},
      {"umount2", EPERM},
      {"pivot_root", EPERM},
      {"move_mount", EPERM},
      {"open_tree", EPERM},
      {"open_tree_attr", EPERM},
      {"fsopen", EPERM},
      {"fsconfig", EPERM},
      {"fsmount", EPERM},
      {"fspick", EPERM},
      {"mount_setattr", EPERM},
      {"unshare", EPERM},
      {"setns", EPERM},
      {"swapon", EPERM},
      {"swapoff", EPERM},
      {"reboot", EPERM},
      {"acct", EPERM},
      {"quotactl", EPERM},
      {"quotactl_fd", EPERM},
      {"syslog", EPERM},
      {"vhangup", EPERM},
      {"ptrace", EPERM},
      {"process_vm_readv", EPERM},
      {"process_vm_writev", EPERM},
      {"pidfd_getfd", EPERM},
      {"setxattr", EOPNOTSUPP},
      {"lsetxattr", EOPNOTSUPP},
      {"fsetxattr", EOPNOTSUPP},
      {"setxattrat", EOPNOTSUPP},
      {"removexattr", EOPNOTSUPP},
      {"lremovexattr", EOPNOTSUPP},
      {"fremovexattr", EOPNOTSUPP},
      {"removexattrat", EOPNOTSUPP},
  };
  for (auto [name, err] : denied) {
    SCOPED_TRACE(name);
    EXPECT_THAT(Answer(name), Optional(err));
    EXPECT_THAT(Answer(name, {~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull}), Optional(err));
  }
}

TEST(SyscallPolicyTest, EveryRowSaysWhy) {
  for (bool trace : {false, true}) {
    for (const PolicyRow& row : SyscallPolicyRows({trace})) {
      EXPECT_FALSE(row.reason.empty()) << row.syscall;
      EXPECT_NE(row.errno_value, 0) << row.syscall;
    }
  }
}

TEST(SyscallPolicyTest, EverydayCallsAreAllowed) {
  for (const char* name : {"read", "write", "openat", "execve", "getpid", "mmap", "wait4",
                           "connect", "getxattr", "listxattr", "fchown", "chown", "rename",
                           "seccomp", "prctl", "memfd_create", "name_to_handle_at", "chroot"}) {
    EXPECT_EQ(Answer(name), std::nullopt) << name;
  }
}

TEST(SyscallPolicyTest, CloneWithAnyNamespaceFlagIsDeniedPlainCloneIsNot) {
  for (uint64_t ns : {CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                      CLONE_NEWPID, CLONE_NEWNET}) {
    SCOPED_TRACE(ns);
    EXPECT_THAT(Answer("clone", {ns}), Optional(EPERM));
    EXPECT_THAT(Answer("clone", {ns | SIGCHLD | CLONE_VM | CLONE_FS}), Optional(EPERM));
    EXPECT_THAT(Answer("clone", {ns | 0xffffffff00000000ull}), Optional(EPERM));
  }
  // fork, vfork, pthread_create's flags.
  const uint64_t thread = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                          CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
  for (uint64_t flags : {uint64_t{SIGCHLD}, uint64_t{CLONE_VM | CLONE_VFORK | SIGCHLD}, thread,
                         uint64_t{CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD}}) {
    EXPECT_EQ(Answer("clone", {flags}), std::nullopt) << flags;
  }
}

// The kernel reads personality's argument as 32 bits: only PER_LINUX (0) and the query
// (0xffffffff) pass, whatever the upper half of the register holds.
TEST(SyscallPolicyTest, PersonalityOnlyLinuxAndTheQuery) {
  for (uint64_t upper : {0ull, 0xffffffff00000000ull, 0x100000000ull}) {
    EXPECT_EQ(Answer("personality", {upper | 0}), std::nullopt);
    EXPECT_EQ(Answer("personality", {upper | 0xffffffff}), std::nullopt);
    for (uint64_t p : {uint64_t{ADDR_NO_RANDOMIZE}, uint64_t{PER_LINUX32}, uint64_t{1},
                       uint64_t{READ_IMPLIES_EXEC}, uint64_t{MMAP_PAGE_ZERO}, uint64_t{0xfffffffe},
                       uint64_t{0x80000000}, uint64_t{0x7fffffff}, uint64_t{PER_BSD}}) {
      EXPECT_THAT(Answer("personality", {upper | p}), Optional(EPERM)) << std::hex << p;
    }
  }
  // Every single bit, every all-but-one value, and a random sample of the rest.
  for (unsigned b = 0; b < 32; ++b) {
    EXPECT_THAT(Answer("personality", {1ull << b}), Optional(EPERM)) << b;
    EXPECT_THAT(Answer("personality", {0xffffffffull & ~(1ull << b)}), Optional(EPERM)) << b;
  }
  std::mt19937 rng(14);
  auto rules = ExpandPolicy(SyscallPolicyRows({}));
  for (int i = 0; i < 20000; ++i) {
    uint32_t v = static_cast<uint32_t>(rng());
    bool allowed = v == 0 || v == 0xffffffff;
    EXPECT_EQ(EvaluateRules(rules, "personality", {v}).has_value(), !allowed) << v;
  }
}

TEST(SyscallPolicyTest, IoctlTerminalInjectionOnly) {
  EXPECT_THAT(Answer("ioctl", {0, 0x5412}), Optional(EPERM));             // TIOCSTI
  EXPECT_THAT(Answer("ioctl", {0, 0x541C}), Optional(EPERM));             // TIOCLINUX
  EXPECT_THAT(Answer("ioctl", {0, 0xdead00005412ull}), Optional(EPERM));  // upper junk
  for (uint64_t ok : {0x5401ull /*TCGETS*/, 0x5413ull /*TIOCGWINSZ*/, 0x541Bull /*FIONREAD*/}) {
    EXPECT_EQ(Answer("ioctl", {0, ok}), std::nullopt) << ok;
  }
}

TEST(SyscallPolicyTest, SocketFamiliesAndNetlinkProtocols) {
  const std::set<uint64_t> allowed = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
  for (uint64_t family = 0; family < 1024; ++family) {
    SCOPED_TRACE(family);
    if (allowed.count(family)) {
      EXPECT_EQ(Answer("socket", {family, SOCK_STREAM, 0}), std::nullopt);
      EXPECT_EQ(Answer("socket", {family | 0xffffffff00000000ull, SOCK_STREAM, 0}),
                std::nullopt);  // the kernel reads an int: the same family
    } else {
      EXPECT_THAT(Answer("socket", {family, SOCK_STREAM, 0}), Optional(EAFNOSUPPORT));
    }
  }
  EXPECT_THAT(Answer("socket", {0xfffffffeull}), Optional(EAFNOSUPPORT));
  // AF_INET keeps every protocol (raw sockets are the kernel's to refuse without a capability).
  EXPECT_EQ(Answer("socket", {AF_INET, SOCK_RAW, 1}), std::nullopt);
  EXPECT_EQ(Answer("socket", {AF_NETLINK, SOCK_RAW, NETLINK_ROUTE}), std::nullopt);
  EXPECT_EQ(Answer("socket", {AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_ROUTE}), std::nullopt);
  for (uint64_t proto = 1; proto < 64; ++proto) {
    EXPECT_THAT(Answer("socket", {AF_NETLINK, SOCK_RAW, proto}), Optional(EPROTONOSUPPORT))
        << proto;
  }
  EXPECT_THAT(Answer("socket", {AF_NETLINK, SOCK_RAW, NETLINK_AUDIT}), Optional(EPROTONOSUPPORT));
  EXPECT_THAT(Answer("socket", {AF_NETLINK, SOCK_RAW, 0x100000000ull | NETLINK_NETFILTER}),
              Optional(EPROTONOSUPPORT));
}

// Every mode 0..07777: a chmod-like call is denied exactly when it sets S_ISUID or S_ISGID.
TEST(SyscallPolicyTest, NoSetuidOrSetgidModes) {
  struct Call {
    const char* name;
    unsigned mode_arg;
  };
  for (Call c : {Call{"chmod", 1}, Call{"fchmod", 1}, Call{"fchmodat", 2}, Call{"fchmodat2", 2},
                 Call{"creat", 1}, Call{"mknod", 1}, Call{"mknodat", 2}}) {
    for (uint64_t mode = 0; mode <= 07777; ++mode) {
      Args a{};
      a[c.mode_arg] = mode | (std::string_view(c.name).substr(0, 5) == "mknod" ? S_IFREG : 0);
      bool setid = mode & (S_ISUID | S_ISGID);
      std::optional<int> got = Answer(c.name, a);
      if (setid) {
        EXPECT_THAT(got, Optional(EPERM)) << c.name << " " << std::oct << mode;
      } else {
        EXPECT_EQ(got, std::nullopt) << c.name << " " << std::oct << mode;
      }
    }
  }
}

TEST(SyscallPolicyTest, OpenCreatingASetidFileIsDenied) {
  const uint64_t tmpfile = O_TMPFILE | O_RDWR;
  for (uint64_t flags :
       {uint64_t{O_CREAT | O_WRONLY}, uint64_t{O_CREAT | O_EXCL | O_RDWR}, tmpfile}) {
    for (uint64_t mode : {04755ull, 02755ull, 06777ull, 04000ull}) {
      EXPECT_THAT(Answer("open", {0, flags, mode}), Optional(EPERM)) << flags << " " << mode;
      EXPECT_THAT(Answer("openat", {0, 0, flags, mode}), Optional(EPERM)) << flags << " " << mode;
    }
    EXPECT_EQ(Answer("open", {0, flags, 0755}), std::nullopt);
    EXPECT_EQ(Answer("openat", {0, 0, flags, 0644}), std::nullopt);
  }
  // Without O_CREAT/O_TMPFILE the mode is not used: junk there is fine (and common).
  for (uint64_t flags :
       {uint64_t{O_RDONLY}, uint64_t{O_WRONLY | O_TRUNC}, uint64_t{O_DIRECTORY | O_RDONLY}}) {
    EXPECT_EQ(Answer("open", {0, flags, 04755}), std::nullopt) << flags;
    EXPECT_EQ(Answer("openat", {0, 0, flags, 06777}), std::nullopt) << flags;
  }
}

TEST(SyscallPolicyTest, PtraceOnlyWithTheOptIn) {
  for (const char* name : {"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"}) {
    EXPECT_THAT(Answer(name, {}, {.allow_ptrace = false}), Optional(EPERM)) << name;
    EXPECT_EQ(Answer(name, {}, {.allow_ptrace = true}), std::nullopt) << name;
  }
  // The opt-in opens nothing else.
  EXPECT_THAT(Answer("unshare", {}, {.allow_ptrace = true}), Optional(EPERM));
}

TEST(SyscallPolicyTest, RulesOfOneCallAgreeOnTheErrno) {
  // The compiled filter answers with whichever rule libseccomp tests first: rows that can match
  // the same call must give the same errno, or the answer would depend on rule order.
  std::map<std::string, std::set<int>> errnos;
  for (const PolicyRow& row : SyscallPolicyRows({})) {
    if (row.syscall != "socket") errnos[row.syscall].insert(row.errno_value);
  }
  for (const auto& [name, set] : errnos) EXPECT_EQ(set.size(), 1u) << name;
  // The two socket rows are disjoint: the family is AF_NETLINK in one and never in the other.
  for (uint64_t proto : {1ull, 9ull}) {
    EXPECT_THAT(Answer("socket", {AF_NETLINK, SOCK_RAW, proto}), Optional(EPROTONOSUPPORT));
  }
}

TEST(SeccompFilterNameTest, NamesTheExpandedPolicy) {
  std::string plain = SeccompFilterName({});
  EXPECT_EQ(plain.substr(0, 7), "sha256:");
  EXPECT_EQ(plain.size(), 7u + 64u);
  EXPECT_EQ(plain, SeccompFilterName({}));  // a pure function
  EXPECT_NE(plain, SeccompFilterName({.allow_ptrace = true}));
  std::string text = PolicyText(ExpandPolicy(SyscallPolicyRows({})));
  EXPECT_THAT(text, HasSubstr("default allow\nnon-native-abi kill-process\n"));
  EXPECT_THAT(text, HasSubstr("io_uring_setup errno=38\n"));
  EXPECT_THAT(text, HasSubstr("chmod errno=1 a1&0x800==0x800\n"));
}

TEST(ExpandPolicyTest, Low32NotInCoversExactlyTheOthers) {
  PolicyRow row{"x", {{0, ArgCondition::Kind::kLow32NotIn, 0, {5, 0, 0xffffffff, 6}}}, 1, "t"};
  auto rules = ExpandPolicy({row});
  EXPECT_LE(rules.size(), 4u * 32u);
  for (uint64_t v : {0ull, 5ull, 6ull, 0xffffffffull, 0x1234500000005ull}) {
    EXPECT_EQ(EvaluateRules(rules, "x", {v}), std::nullopt) << v;
  }
  for (uint64_t v : {1ull, 4ull, 7ull, 0xfffffffeull, 0x80000000ull, 0x700000007ull}) {
    EXPECT_THAT(EvaluateRules(rules, "x", {v}), Optional(1)) << v;
  }
}

}  // namespace
}  // namespace codespace
