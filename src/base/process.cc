#include "base/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/keyctl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "base/file_util.h"

extern char** environ;

namespace codespace {

std::string ExitStatus::ToString() const {
  if (signaled) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
  return fmt::format("exited {}", code);
}

namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// What the child reports through the error pipe before it dies: which step failed and errno.
struct ChildError {
  int step;  // an index into kStepNames
  int err;
};

constexpr const char* kStepNames[] = {"execve",
                                      "unshare",
                                      "chdir",
                                      "dup2",
                                      "setsid",
                                      "write uid_map",
                                      "bring up lo",
                                      "setns(CLONE_NEWNET)",
                                      "bind files",
                                      "drop capabilities",
                                      "attach the idmapped workspace (unshare(CLONE_NEWNS), "
                                      "move_mount)",
                                      "become the run's uid (setgroups, setresgid, setresuid)",
                                      "keyctl(KEYCTL_JOIN_SESSION_KEYRING)",
                                      "join cgroup (write cgroup.procs)",
                                      "write /proc/self/oom_score_adj",
                                      "setrlimit(RLIMIT_NOFILE)"};

[[noreturn]] void ChildFail(int fd, int step) {
  ChildError e{step, errno};
  ssize_t ignored = ::write(fd, &e, sizeof(e));
  (void)ignored;
  ::_exit(127);
}

// Async-signal-safe: only raw syscalls between fork and exec.
bool WriteSmallFile(const char* path, const char* data) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::write(fd, data, strlen(data));
  ::close(fd);
  return n == static_cast<ssize_t>(strlen(data));
}

void FormatIdMap(char* buf, size_t size, unsigned id) {
  // "<id> <id> 1\n" without snprintf (not async-signal-safe in theory).
  char digits[16];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + id % 10);
    id /= 10;
  } while (id && n < 15);
  size_t pos = 0;
  for (int rep = 0; rep < 2; ++rep) {
    for (int i = n - 1; i >= 0 && pos + 1 < size; --i) buf[pos++] = digits[i];
    if (pos + 1 < size) buf[pos++] = ' ';
  }
  const char tail[] = "1\n";
  for (size_t i = 0; tail[i] && pos + 1 < size; ++i) buf[pos++] = tail[i];
  buf[pos] = '\0';
}

}  // namespace

ChildProcess::~ChildProcess() {
  if (running()) {
    Signal(SIGKILL).IgnoreError();
    Wait().status().IgnoreError();
  }
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (running()) {
      Signal(SIGKILL).IgnoreError();
      Wait().status().IgnoreError();
    }
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::move(other.pidfd_);
    reaped_ = std::exchange(other.reaped_, false);
  }
  return *this;
}

Result<ExitStatus> ChildProcess::Wait() {
  if (pid_ <= 0) return FailedPreconditionError("Wait: no child");
  if (reaped_) return FailedPreconditionError("Wait: child already reaped");
  siginfo_t info{};
  for (;;) {
    int rc = pidfd_ ? ::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED)
                    : ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED);
    if (rc == 0) break;
    if (errno == EINTR) continue;
    return ErrnoError(fmt::format("waitid(pid {})", pid_), errno);
  }
  reaped_ = true;
  if (info.si_code == CLD_EXITED) return ExitStatus::Exited(info.si_status);
  return ExitStatus::Killed(info.si_status);
}

Result<std::optional<ExitStatus>> ChildProcess::WaitFor(std::chrono::milliseconds timeout) {
  if (reaped_) return FailedPreconditionError("WaitFor: child already reaped");
  pollfd p{pidfd_.get(), POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) return ErrnoError("poll(pidfd)", errno);
  if (rc == 0) return std::optional<ExitStatus>();
  ASSIGN_OR_RETURN(ExitStatus st, Wait());
  return std::optional<ExitStatus>(st);
}

Status ChildProcess::Signal(int sig) {
  if (pid_ <= 0 || reaped_) return OkStatus();
  if (::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0) != 0) {
    if (errno == ESRCH) return OkStatus();  // exited, not yet reaped
    return ErrnoError(fmt::format("pidfd_send_signal(pid {}, {})", pid_, sig), errno);
  }
  return OkStatus();
}

namespace {

// The kernel's struct sigaction for rt_sigaction(2) (x86-64, arm64: handler, flags, restorer,
// a 64-bit mask), not glibc's.
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  uint64_t mask;
};
#if !defined(__x86_64__) && !defined(__aarch64__)
#error "KernelSigaction: check struct sigaction's layout for this architecture"
#endif

}  // namespace

Status ChildProcess::KillWithChildren() {
  if (pid_ <= 0 || reaped_) return OkStatus();
  RETURN_IF_ERROR(Signal(SIGSTOP));
  // Stopped (or gone): either way it forks no more. WNOWAIT leaves an exit for Wait().
  siginfo_t info{};
  for (;;) {
    if (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WSTOPPED | WEXITED | WNOWAIT) ==
        0) {
      break;
    }
    if (errno != EINTR) return ErrnoError(fmt::format("waitid(pid {}, WSTOPPED)", pid_), errno);
  }
  // Its children cannot be reaped, nor their pids reused, while it is stopped and unreaped.
  for (pid_t c : ChildrenOf(pid_)) ::kill(c, SIGKILL);
  return Signal(SIGKILL);
}

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  const std::string task_dir = fmt::format("/proc/{}/task", pid);
  bool have_children_files = false;
  if (DIR* tasks = ::opendir(task_dir.c_str())) {
    while (dirent* t = ::readdir(tasks)) {
      if (t->d_name[0] == '.') continue;
      auto text = ReadFileToString(task_dir + "/" + t->d_name + "/children");
      if (!text.ok()) continue;
      have_children_files = true;
      const char* p = text->c_str();
      char* end = nullptr;
      for (long c = std::strtol(p, &end, 10); end != p; c = std::strtol(p, &end, 10)) {
        out.push_back(static_cast<pid_t>(c));
        p = end;
      }
    }
    ::closedir(tasks);
  }
  if (have_children_files) return out;
  return ChildrenOfFromStat(pid);
}

Status RequireOneThread(std::string_view who) {
  ASSIGN_OR_RETURN(std::string status, ReadFileToString("/proc/self/status"));
  size_t at = status.find("\nThreads:");
  if (at == std::string::npos || std::atoi(status.c_str() + at + 9) != 1) {
    return FailedPreconditionError(fmt::format("{}: the caller has more than one thread", who));
  }
  return OkStatus();
}

std::vector<pid_t> ChildrenOfFromStat(pid_t pid) {
  std::vector<pid_t> out;
  // Every process whose parent (field 4 of stat, after the name) is `pid`.
  if (DIR* proc = ::opendir("/proc")) {
    while (dirent* e = ::readdir(proc)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      auto stat = ReadFileToString(fmt::format("/proc/{}/stat", e->d_name));
      if (!stat.ok()) continue;
      size_t close = stat->rfind(')');
      if (close == std::string::npos || close + 4 >= stat->size()) continue;
      if (std::atoi(stat->c_str() + close + 4) == pid) out.push_back(std::atoi(e->d_name));
    }
    ::closedir(proc);
  }
  return out;
}

Result<ChildProcess> Spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return InvalidArgumentError("Spawn: empty argv");
  // Everything the child needs is prepared before fork: after it only syscalls run.
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = o.env ? *o.env : CurrentEnvironment();
  std::vector<char*> envp;
  for (const auto& e : env_storage) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  std::string program = o.argv[0];
  if (program.find('/') == std::string::npos) {
    std::string path_env = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
    for (const auto& e : env_storage) {
      if (e.rfind("PATH=", 0) == 0) path_env = e.substr(5);
    }
    auto found = FindExecutable(program, path_env);
    if (!found.ok()) {
      return Status(StatusCode::kNotFound,
                    fmt::format("execve({}): No such file or directory", program));
    }
    program = *found;
  }
  const std::string oom_adj = o.oom_score_adj ? std::to_string(*o.oom_score_adj) : "";
  char uid_map[64], gid_map[64];
  FormatIdMap(uid_map, sizeof(uid_map), ::getuid());
  FormatIdMap(gid_map, sizeof(gid_map), ::getgid());

  ASSIGN_OR_RETURN(Pipe err_pipe, MakePipe());
  ASSIGN_OR_RETURN(UniqueFd devnull, OpenFile("/dev/null", O_RDWR));

  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork", errno);
  if (pid == 0) {
    int efd = err_pipe.write.get();
    // Into the run's cgroup before anything else: every later step, and every process it
    // makes, is inside it ("0" is the writing process).
    for (int fd : o.cgroup_procs_fds) {
      if (::write(fd, "0", 1) != 1) ChildFail(efd, 13);
    }
    if (!oom_adj.empty() && !WriteSmallFile("/proc/self/oom_score_adj", oom_adj.c_str())) {
      ChildFail(efd, 14);
    }
    if (o.parent_death_signal) {
      ::prctl(PR_SET_PDEATHSIG, o.parent_death_signal);
      if (::getppid() != parent) ::_exit(127);  // died before the prctl: nobody will signal
    }
    if (o.new_session && ::setsid() < 0) ChildFail(efd, 4);
    if (o.netns_fd >= 0 && ::setns(o.netns_fd, CLONE_NEWNET) != 0) ChildFail(efd, 7);
    if (!o.bind_files.empty()) {
      if (::unshare(CLONE_NEWNS) != 0 ||
          ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        ChildFail(efd, 8);
      }
      for (const auto& [from, to] : o.bind_files) {
        if (::mount(from.c_str(), to.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
            ::mount(nullptr, to.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
          ChildFail(efd, 8);
        }
      }
    }
    if (!o.unshare_attempts.empty()) {
      bool done = false;
      for (int flags : o.unshare_attempts) {
        if (::unshare(flags) == 0) {
          if (flags & CLONE_NEWUSER) {
            if (!WriteSmallFile("/proc/self/setgroups", "deny") ||
                !WriteSmallFile("/proc/self/uid_map", uid_map) ||
                !WriteSmallFile("/proc/self/gid_map", gid_map)) {
              ChildFail(efd, 5);
            }
          }
          done = true;
          break;
        }
      }
      if (!done) ChildFail(efd, 1);
    }
    if (o.loopback_up) {
      int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      struct ifreq ifr {};
      memcpy(ifr.ifr_name, "lo", 3);
      if (s < 0 || ::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) ChildFail(efd, 6);
      ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
      if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) ChildFail(efd, 6);
      ::close(s);
    }
    // Move every source fd out of the 0..max target range first, so that a mapping whose source
    // is another mapping's target is not clobbered.
    int max_target = 2;
    for (auto [from, to] : o.fds) max_target = std::max(max_target, to);
    int staged[64];
    size_t n = std::min<size_t>(o.fds.size(), 64);
    for (size_t i = 0; i < n; ++i) {
      staged[i] = ::fcntl(o.fds[i].first, F_DUPFD_CLOEXEC, max_target + 1);
      if (staged[i] < 0) ChildFail(efd, 3);
    }
    // The idmapped workspace too: its number may be a mapping's target (a supervisor whose
    // stdin is the caller's has no fd 0 of its own, and the mount fd took it), which the dup2s
    // below would overwrite before it is attached.
    int mount_fd = -1;
    if (o.mount_fd >= 0 && (mount_fd = ::fcntl(o.mount_fd, F_DUPFD_CLOEXEC, max_target + 1)) < 0) {
      ChildFail(efd, 3);
    }
    bool set[3] = {false, false, false};
    for (size_t i = 0; i < n; ++i) {
      int to = o.fds[i].second;
      if (::dup2(staged[i], to) < 0) ChildFail(efd, 3);  // dup2 clears CLOEXEC on `to`
      if (to < 3) set[to] = true;
    }
    for (int i = 0; i < 3; ++i) {
      if (!set[i] && ::dup2(devnull.get(), i) < 0) ChildFail(efd, 3);
    }
    // Nothing else the caller had open reaches the program: every descriptor above 2 that is
    // not a mapping's target is marked close-on-exec (the caller's own non-CLOEXEC ones, from a
    // shell or a library, would otherwise walk into the sandbox).
    {
      int targets[64];
      size_t nt = 0;
      for (size_t i = 0; i < n; ++i) {
        if (o.fds[i].second > 2) targets[nt++] = o.fds[i].second;
      }
      std::sort(targets, targets + nt);
      unsigned next = 3;
      for (size_t i = 0; i < nt; ++i) {
        unsigned t = static_cast<unsigned>(targets[i]);
        if (t > next) ::syscall(SYS_close_range, next, t - 1, CLOSE_RANGE_CLOEXEC);
        next = std::max(next, t + 1);
      }
      ::syscall(SYS_close_range, next, ~0u, CLOSE_RANGE_CLOEXEC);
    }
    // The run's own identity (see SpawnOptions): mounts while still root, then the uid, then
    // the keyring (made by, and so owned by, the uid the program runs as).
    if (mount_fd >= 0) {
      if (::unshare(CLONE_NEWNS) != 0 ||
          ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0 ||
          ::move_mount(mount_fd, "", AT_FDCWD, o.mount_target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) !=
              0) {
        ChildFail(efd, 10);
      }
    }
    if (o.uid != static_cast<uid_t>(-1)) {
      if (o.drop_capabilities) {
        // Now, while CAP_SETPCAP is held; after setresuid it is gone.
        for (int cap = 0; cap <= 63; ++cap) {
          if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) ChildFail(efd, 11);
        }
      }
      if (::setgroups(0, nullptr) != 0 || ::setresgid(o.gid, o.gid, o.gid) != 0 ||
          ::setresuid(o.uid, o.uid, o.uid) != 0) {
        ChildFail(efd, 11);
      }
    }
    if (o.new_session_keyring) {
      // A keyctl the kernel or a filter above us refuses (a container's seccomp profile answers
      // EPERM, a kernel without keys ENOSYS) refuses the program too, which inherits that
      // filter (and codespace's own filter denies keyctl): it reaches no keyring, the caller's
      // included. Anything else fails the spawn.
      if (::syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr, 0, 0, 0) < 0 &&
          errno != EPERM && errno != ENOSYS) {
        ChildFail(efd, 12);
      }
      if (o.uid != static_cast<uid_t>(-1)) {
        ::syscall(SYS_keyctl, KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING, 0, 0, 0);
      }
    }
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) ChildFail(efd, 2);
    // exec keeps what is ignored: a caller's SIG_IGN (the supervisor ignores SIGPIPE) would
    // otherwise reach the program, and `yes | head -1` would end in an error instead of quietly.
    // The raw call, because glibc's sigaction() refuses its own two real-time signals (32, 33),
    // which whoever started us may have ignored too.
    KernelSigaction dfl{};
    dfl.handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) {
        ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof(dfl.mask));
      }
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (o.drop_capabilities) {
      // Bounding set first, while CAP_SETPCAP is still held; a process without it (EPERM) has
      // nothing to drop there that matters: with no_new_privs, execve's new permitted set is
      // clamped to the old one, which capset() below empties.
      for (int cap = 0; cap <= 63; ++cap) {
        if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL && errno != EPERM) {
          ChildFail(efd, 9);
        }
      }
      ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
      __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct data[2] = {};
      if (::syscall(SYS_capset, &hdr, data) != 0) ChildFail(efd, 9);
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(efd, 9);
    }
    if (o.nofile_limit) {
      struct rlimit rl {
        o.nofile_limit, o.nofile_limit
      };
      if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ChildFail(efd, 15);
    }
    ::execve(program.c_str(), argv.data(), envp.data());
    ChildFail(efd, 0);
  }
  err_pipe.write.reset();
  UniqueFd pidfd(PidfdOpen(pid));
  if (!pidfd) {
    int err = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return ErrnoError("pidfd_open", err);
  }
  ChildProcess child(pid, std::move(pidfd));
  ChildError e{};
  ssize_t got;
  do {
    got = ::read(err_pipe.read.get(), &e, sizeof(e));
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof(e))) {
    child.Wait().status().IgnoreError();
    std::string call = kStepNames[e.step];
    if (e.step == 0) call = fmt::format("execve({})", program);
    if (e.step == 2) call = fmt::format("chdir({})", o.cwd);
    if (e.step == 1) {
      call = "unshare(";
      int last = o.unshare_attempts.back();
      call += (last & CLONE_NEWUSER) ? "CLONE_NEWUSER|CLONE_NEWNET)" : "CLONE_NEWNET)";
    }
    return ErrnoError(call, e.err);
  }
  return child;
}

Result<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                 std::optional<std::vector<std::string>> env) {
  ASSIGN_OR_RETURN(Pipe out, MakePipe());
  SpawnOptions o;
  o.argv = argv;
  o.env = std::move(env);
  o.fds = {{out.write.get(), 1}, {out.write.get(), 2}};
  ASSIGN_OR_RETURN(ChildProcess child, Spawn(o));
  out.write.reset();
  ASSIGN_OR_RETURN(std::string text, ReadAll(out.read.get()));
  ASSIGN_OR_RETURN(ExitStatus st, child.Wait());
  return CommandOutput{st, std::move(text)};
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace codespace
