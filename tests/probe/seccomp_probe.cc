// seccomp_probe: calls every syscall the run's filter denies (docs/seccomp.md), a sample of the
// ones it allows, and the two non-native entry points of an x86_64 kernel, each in a child of
// its own (setsid, so that nothing reaches a terminal), and checks the answer.
//
//   seccomp_probe [--control] [--allow-ptrace] [DIR]
//
// Inside a filtered run: every denied call must get the filter's errno (or the process killed
// by SIGSYS); exit 0, or 10 + the index of the first wall that fell (nsjail style), after one
// line per check. --control (outside any filter): every denied call must get something ELSE —
// the arguments are chosen so that the kernel itself answers with another errno (EINVAL,
// EFAULT, EBADF, ENOENT...) or succeeds harmlessly — which shows each check can fail. Allowed
// calls must get the same answer both ways. --allow-ptrace: the run opted in, ptrace and its
// kin must work. DIR (default: the working directory) is where the file-mode checks create,
// and then remove, their files.
//
// Every argument is harmless also for root outside a sandbox: invalid flags, magic numbers,
// descriptors or pointers where the call would change something (reboot, kexec, mount, acct,
// swap, quotas), a tty-less session for vhangup, and files only in DIR.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace {

// How a call ended: ok, an errno, or the process killed by a signal.
struct Outcome {
  int err = 0;  // 0: the call succeeded
  int sig = 0;  // non-zero: killed
  bool operator==(const Outcome&) const = default;
};
std::string Describe(Outcome o) {
  if (o.sig) return "killed by signal " + std::to_string(o.sig);
  if (o.err == 0) return "ok";
  return std::string(strerrorname_np(o.err) ? strerrorname_np(o.err) : "E?") + " (" +
         strerror(o.err) + ")";
}
constexpr Outcome kOk{0, 0};
constexpr Outcome Err(int e) { return {e, 0}; }
constexpr Outcome kKilled{0, SIGSYS};

struct Check {
  std::string name;
  bool denied;                 // by the filter (else: a sample of what it allows)
  Outcome filtered;            // what a denied call gets inside; what an allowed one gets anywhere
  std::function<long()> call;  // -1 and errno, or anything else for success
};

std::string g_dir = ".";
pid_t g_probe = 0;  // the probe's own pid: names every file the checks make
int g_serial = 0;   // per check child (each starts from its fork's copy)
std::string Prefix() { return ".seccomp-probe-" + std::to_string(g_probe) + "-"; }
std::string Fresh() {
  return g_dir + "/" + Prefix() + std::to_string(getpid()) + "-" + std::to_string(++g_serial);
}

long Sys(long nr, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  return syscall(nr, a, b, c, d, e, f);
}
long P(const void* p) { return reinterpret_cast<long>(p); }

// Runs one check in a child: its outcome.
Outcome Run(const Check& c) {
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    errno = 0;
    long rc = c.call();
    _exit(rc == -1 ? (errno & 0xff) : 0);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(st)) return {0, WTERMSIG(st)};
  return {WEXITSTATUS(st), 0};
}

// A file of mode 0644 in DIR, for the chmod checks: its path.
std::string MadeFile() {
  std::string p = Fresh();
  int fd = open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
  return p;
}

void* Nothing(void*) { return nullptr; }

std::vector<Check> Checks(bool allow_ptrace) {
  std::vector<Check> v;
  auto deny = [&](std::string name, int err, std::function<long()> f) {
    v.push_back({std::move(name), true, Err(err), std::move(f)});
  };
  auto allow = [&](std::string name, Outcome o, std::function<long()> f) {
    v.push_back({std::move(name), false, o, std::move(f)});
  };
  // Probed-for features: ENOSYS.
  deny("io_uring_setup", ENOSYS, [] { return Sys(SYS_io_uring_setup, 0, 0); });
  deny("io_uring_enter", ENOSYS, [] { return Sys(SYS_io_uring_enter, -1, 0, 0, 0, 0, 0); });
  deny("io_uring_register", ENOSYS, [] { return Sys(SYS_io_uring_register, -1, 0, 0, 0); });
  deny("userfaultfd", ENOSYS, [] { return Sys(SYS_userfaultfd, 0x7fffffff); });
  deny("clone3", ENOSYS, [] { return Sys(SYS_clone3, 0, 0); });
  deny("openat2", ENOSYS, [] { return Sys(SYS_openat2, AT_FDCWD, P("x"), 0, 0); });
  deny("add_key", ENOSYS, [] { return Sys(SYS_add_key, 0, 0, 0, 0, 0); });
  deny("keyctl", ENOSYS, [] { return Sys(SYS_keyctl, 0xdead, 0, 0, 0, 0); });
  deny("request_key", ENOSYS, [] { return Sys(SYS_request_key, 0, 0, 0, 0); });
  // Refused: EPERM.
  deny("bpf", EPERM, [] { return Sys(SYS_bpf, 0x7fffffff, 0, 0); });
  deny("perf_event_open", EPERM, [] { return Sys(SYS_perf_event_open, 0, 0, -1, -1, 0); });
  deny("kexec_load", EPERM, [] { return Sys(SYS_kexec_load, 0, 1000, 0, 0xffff0000); });
  deny("kexec_file_load", EPERM, [] { return Sys(SYS_kexec_file_load, -1, -1, 0, 0, 0xffffffff); });
  deny("init_module", EPERM, [] { return Sys(SYS_init_module, 0, 0, 0); });
  deny("finit_module", EPERM, [] { return Sys(SYS_finit_module, -1, P(""), 0); });
  deny("delete_module", EPERM, [] { return Sys(SYS_delete_module, P(""), O_NONBLOCK); });
  deny("open_by_handle_at", EPERM, [] { return Sys(SYS_open_by_handle_at, -1, 0, 0); });
  deny("mount", EPERM, [] { return Sys(SYS_mount, 0, 0, 0, 0, 0); });
  deny("umount2", EPERM, [] { return Sys(SYS_umount2, P(""), 0xffffffff); });
  deny("pivot_root", EPERM, [] { return Sys(SYS_pivot_root, P(""), P("")); });
  deny("move_mount", EPERM, [] { return Sys(SYS_move_mount, -1, P(""), -1, P(""), 0xffffffff); });
  deny("open_tree", EPERM, [] { return Sys(SYS_open_tree, -1, P(""), 0xffffffff); });
  deny("open_tree_attr", EPERM, [] { return Sys(467, -1, P(""), 0xffffffff, 0, 0); });
  deny("fsopen", EPERM, [] { return Sys(SYS_fsopen, 0, 0xffffffff); });
  deny("fsconfig", EPERM, [] { return Sys(SYS_fsconfig, -1, 0xffff, 0, 0, 0); });
  deny("fsmount", EPERM, [] { return Sys(SYS_fsmount, -1, 0xffffffff, 0); });
  deny("fspick", EPERM, [] { return Sys(SYS_fspick, -1, P(""), 0xffffffff); });
  deny("mount_setattr", EPERM, [] { return Sys(SYS_mount_setattr, -1, P(""), 0xffffffff, 0, 0); });
  // An invalid bit beside CLONE_NEWUSER: the kernel says EINVAL and makes nothing.
  deny("unshare", EPERM, [] { return Sys(SYS_unshare, CLONE_NEWUSER | 0x1); });
  deny("setns", EPERM, [] { return Sys(SYS_setns, -1, 0); });
  // CLONE_THREAD without CLONE_SIGHAND: EINVAL from the kernel, so no process is ever made.
  for (auto [flag, name] : {std::pair<long, const char*>{CLONE_NEWNS, "NEWNS"},
                            {CLONE_NEWCGROUP, "NEWCGROUP"},
                            {CLONE_NEWUTS, "NEWUTS"},
                            {CLONE_NEWIPC, "NEWIPC"},
                            {CLONE_NEWUSER, "NEWUSER"},
                            {CLONE_NEWPID, "NEWPID"},
                            {CLONE_NEWNET, "NEWNET"}}) {
    deny(std::string("clone(CLONE_") + name + ")", EPERM,
         [flag = flag] { return Sys(SYS_clone, flag | CLONE_THREAD, 0, 0, 0, 0); });
  }
  deny("swapon", EPERM, [] { return Sys(SYS_swapon, 0, 0); });
  deny("swapoff", EPERM, [] { return Sys(SYS_swapoff, 0); });
  deny("reboot", EPERM, [] { return Sys(SYS_reboot, 0, 0, 0, 0); });  // bad magic: EINVAL
  deny("acct", EPERM, [] { return Sys(SYS_acct, P("")); });           // never NULL (= off)
  deny("quotactl", EPERM, [] { return Sys(SYS_quotactl, 0xff, 0, 0, 0); });
  deny("quotactl_fd", EPERM, [] { return Sys(SYS_quotactl_fd, -1, 0xff, 0, 0); });
  deny("syslog", EPERM, [] { return Sys(SYS_syslog, 1000, 0, 0); });
  deny("vhangup", EPERM, [] { return Sys(SYS_vhangup); });  // no tty after setsid: a no-op
  deny("iopl", EPERM, [] { return Sys(SYS_iopl, 4); });
  deny("ioperm", EPERM, [] { return Sys(SYS_ioperm, 0xffffff, 1, 1); });
  deny("personality(ADDR_NO_RANDOMIZE)", EPERM,
       [] { return Sys(SYS_personality, ADDR_NO_RANDOMIZE); });
  deny("personality(PER_LINUX32)", EPERM, [] { return Sys(SYS_personality, PER_LINUX32); });
  deny("personality(upper junk|ADDR_NO_RANDOMIZE)", EPERM,
       [] { return Sys(SYS_personality, 0x100000000L | ADDR_NO_RANDOMIZE); });
  deny("ioctl(TIOCSTI)", EPERM, [] { return Sys(SYS_ioctl, -1, 0x5412, 0); });
  deny("ioctl(TIOCLINUX)", EPERM, [] { return Sys(SYS_ioctl, -1, 0x541C, 0); });
  deny("ioctl(upper junk|TIOCSTI)", EPERM, [] { return Sys(SYS_ioctl, -1, 0xdead00005412L, 0); });
  // Type 999 is invalid: outside, the kernel says EINVAL before it looks at the family.
  for (long family = 0; family < 64; ++family) {
    if (family == AF_UNIX || family == AF_INET || family == AF_INET6 || family == AF_NETLINK) {
      continue;
    }
    deny("socket(family " + std::to_string(family) + ")", EAFNOSUPPORT,
         [family] { return Sys(SYS_socket, family, 999, 0); });
  }
  deny("socket(upper junk|AF_PACKET)", EAFNOSUPPORT,
       [] { return Sys(SYS_socket, 0x100000000L | AF_PACKET, 999, 0); });
  for (long proto = 1; proto < 32; ++proto) {
    deny("socket(AF_NETLINK, protocol " + std::to_string(proto) + ")", EPROTONOSUPPORT,
         [proto] { return Sys(SYS_socket, AF_NETLINK, 999, proto); });
  }
  // ptrace and its kin, on this process itself (outside: they work).
  auto trace = [&](std::string name, std::function<long()> f) {
    if (allow_ptrace) {
      allow(name, kOk, std::move(f));
    } else {
      deny(name, EPERM, std::move(f));
    }
  };
  trace("ptrace(PTRACE_TRACEME)", [] { return Sys(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0); });
  trace("process_vm_readv(self)", [] {
    static char from[8] = "abcdefg", to[8];
    iovec local{to, sizeof(to)}, remote{from, sizeof(from)};
    return Sys(SYS_process_vm_readv, getpid(), P(&local), 1, P(&remote), 1, 0);
  });
  trace("process_vm_writev(self)", [] {
    static char from[8] = "abcdefg", to[8];
    iovec local{from, sizeof(from)}, remote{to, sizeof(to)};
    return Sys(SYS_process_vm_writev, getpid(), P(&local), 1, P(&remote), 1, 0);
  });
  trace("pidfd_getfd(self)", [] {
    long pidfd = Sys(SYS_pidfd_open, getpid(), 0);
    if (pidfd < 0) return pidfd;
    return Sys(SYS_pidfd_getfd, pidfd, 0, 0);
  });
  // Setuid and setgid files (outside: made, and removed at the end).
  for (long mode : {04755L, 02755L}) {
    std::string m = mode == 04755 ? "S_ISUID" : "S_ISGID";
    deny("chmod(" + m + ")", EPERM, [mode] { return Sys(SYS_chmod, P(MadeFile().c_str()), mode); });
    deny("fchmod(" + m + ")", EPERM, [mode] {
      int fd = open(MadeFile().c_str(), O_RDONLY | O_CLOEXEC);
      return Sys(SYS_fchmod, fd, mode);
    });
    deny("fchmodat(" + m + ")", EPERM,
         [mode] { return Sys(SYS_fchmodat, AT_FDCWD, P(MadeFile().c_str()), mode); });
    deny("fchmodat2(" + m + ")", EPERM,
         [mode] { return Sys(452, AT_FDCWD, P(MadeFile().c_str()), mode, 0); });
    deny("open(O_CREAT, " + m + ")", EPERM,
         [mode] { return Sys(SYS_open, P(Fresh().c_str()), O_CREAT | O_WRONLY, mode); });
    deny("openat(O_CREAT, " + m + ")", EPERM, [mode] {
      return Sys(SYS_openat, AT_FDCWD, P(Fresh().c_str()), O_CREAT | O_EXCL | O_WRONLY, mode);
    });
    deny("open(O_TMPFILE, " + m + ")", EPERM,
         [mode] { return Sys(SYS_open, P(g_dir.c_str()), O_TMPFILE | O_RDWR, mode); });
    deny("creat(" + m + ")", EPERM, [mode] { return Sys(SYS_creat, P(Fresh().c_str()), mode); });
    deny("mknod(S_IFREG|" + m + ")", EPERM,
         [mode] { return Sys(SYS_mknod, P(Fresh().c_str()), S_IFREG | mode, 0); });
    deny("mknodat(S_IFREG|" + m + ")", EPERM,
         [mode] { return Sys(SYS_mknodat, AT_FDCWD, P(Fresh().c_str()), S_IFREG | mode, 0); });
  }
  // Extended attributes, on a path that does not exist (outside: ENOENT or EBADF).
  deny("setxattr", EOPNOTSUPP,
       [] { return Sys(SYS_setxattr, P(Fresh().c_str()), P("user.x"), P("v"), 1, 0); });
  deny("lsetxattr", EOPNOTSUPP,
       [] { return Sys(SYS_lsetxattr, P(Fresh().c_str()), P("user.x"), P("v"), 1, 0); });
  deny("fsetxattr", EOPNOTSUPP,
       [] { return Sys(SYS_fsetxattr, -1, P("security.capability"), P("v"), 1, 0); });
  deny("setxattrat", EOPNOTSUPP,
       [] { return Sys(463, AT_FDCWD, P(Fresh().c_str()), 0, P("user.x"), 0, 0); });
  deny("removexattr", EOPNOTSUPP,
       [] { return Sys(SYS_removexattr, P(Fresh().c_str()), P("user.x")); });
  deny("lremovexattr", EOPNOTSUPP,
       [] { return Sys(SYS_lremovexattr, P(Fresh().c_str()), P("user.x")); });
  deny("fremovexattr", EOPNOTSUPP, [] { return Sys(SYS_fremovexattr, -1, P("user.x")); });
  deny("removexattrat", EOPNOTSUPP,
       [] { return Sys(466, AT_FDCWD, P(Fresh().c_str()), 0, P("user.x")); });
#if defined(__x86_64__)
  // The other ABIs: i386 getpid (20) through int 0x80, and x32 getpid.
  v.push_back({"int 0x80 (i386 getpid)", true, kKilled, [] {
                 long ret = 20;
                 asm volatile("int $0x80" : "+a"(ret) : : "memory");
                 return ret < 0 ? (errno = static_cast<int>(-ret), -1L) : 0L;
               }});
  v.push_back({"x32 getpid", true, kKilled, [] { return Sys(0x40000000L | SYS_getpid); }});
#endif
  // What stays allowed: the same answer inside and out.
  allow("getpid", kOk, [] { return Sys(SYS_getpid); });
  allow("fork", kOk, [] {
    pid_t p = fork();
    if (p == 0) _exit(0);
    int st;
    return p < 0 ? -1L : (waitpid(p, &st, 0) == p && WIFEXITED(st) ? 0L : -1L);
  });
  allow("pthread_create (clone3 falls back to clone)", kOk, [] {
    pthread_t t;
    int rc = pthread_create(&t, nullptr, Nothing, nullptr);
    if (rc != 0) return (errno = rc, -1L);
    return static_cast<long>(pthread_join(t, nullptr));
  });
  allow("socket(AF_UNIX)", kOk, [] { return Sys(SYS_socket, AF_UNIX, SOCK_STREAM, 0); });
  allow("socket(AF_INET)", kOk, [] { return Sys(SYS_socket, AF_INET, SOCK_STREAM, 0); });
  allow("socket(AF_INET6)", kOk, [] { return Sys(SYS_socket, AF_INET6, SOCK_DGRAM, 0); });
  allow("socket(AF_NETLINK, NETLINK_ROUTE)", kOk,
        [] { return Sys(SYS_socket, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE); });
  allow("personality(query)", kOk, [] { return Sys(SYS_personality, 0xffffffff); });
  allow("personality(PER_LINUX)", kOk, [] { return Sys(SYS_personality, PER_LINUX); });
  allow("chmod(0755)", kOk, [] { return Sys(SYS_chmod, P(MadeFile().c_str()), 0755); });
  allow("open(O_CREAT, 0644)", kOk,
        [] { return Sys(SYS_open, P(Fresh().c_str()), O_CREAT | O_WRONLY, 0644); });
  allow("mknod(S_IFIFO|0644)", kOk,
        [] { return Sys(SYS_mknod, P(Fresh().c_str()), S_IFIFO | 0644, 0); });
  allow("getxattr (missing file)", Err(ENOENT),
        [] { return Sys(SYS_getxattr, P(Fresh().c_str()), P("user.x"), 0, 0); });
  allow("ioctl(TCGETS) on no descriptor", Err(EBADF), [] { return Sys(SYS_ioctl, -1, 0x5401, 0); });
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  bool control = false, allow_ptrace = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--control") {
      control = true;
    } else if (a == "--allow-ptrace") {
      allow_ptrace = true;
    } else {
      g_dir = a;
    }
  }
  g_probe = getpid();
  std::vector<Check> checks = Checks(allow_ptrace);
  int first_failure = -1, failures = 0;
  for (size_t i = 0; i < checks.size(); ++i) {
    const Check& c = checks[i];
    Outcome got = Run(c);
    bool pass;
    if (!c.denied) {
      pass = got == c.filtered;
    } else {
      pass = control ? !(got == c.filtered) : got == c.filtered;
    }
    std::printf("%s %s: got %s, %s %s\n", pass ? "PASS" : "FAIL", c.name.c_str(),
                Describe(got).c_str(), control && c.denied ? "the filter gives" : "want",
                Describe(c.filtered).c_str());
    if (!pass) {
      ++failures;
      if (first_failure < 0) first_failure = static_cast<int>(i);
    }
  }
  // What the checks made (outside the filter: setuid files among them).
  if (DIR* d = opendir(g_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::string(e->d_name).rfind(Prefix(), 0) == 0) unlink((g_dir + "/" + e->d_name).c_str());
    }
    closedir(d);
  }
  std::printf("%d checks, %d failed\n", static_cast<int>(checks.size()), failures);
  std::fflush(stdout);
  if (first_failure < 0) return 0;
  return std::min(10 + first_failure, 255);
}
