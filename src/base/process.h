// Child processes: spawn with explicit descriptors, wait through a pidfd, signal safely.
//
// A ChildProcess owns its pid until it is reaped. Signals go through the pidfd
// (pidfd_send_signal), so a pid is never signalled after it was reaped and reused.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace codespace {

// How a process ended, as waitid() reports it.
struct ExitStatus {
  bool signaled = false;
  int code = 0;    // exit code when !signaled
  int signal = 0;  // terminating signal when signaled

  static ExitStatus Exited(int c) { return {false, c, 0}; }
  static ExitStatus Killed(int s) { return {true, 0, s}; }
  bool success() const { return !signaled && code == 0; }
  // Shell convention: the exit code, or 128 + signal.
  int ShellCode() const { return signaled ? 128 + signal : code; }
  std::string ToString() const;
  friend bool operator==(const ExitStatus&, const ExitStatus&) = default;
};

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the program: a path, or a name searched on PATH
  // The child's environment; nullopt inherits the parent's.
  std::optional<std::vector<std::string>> env;
  // (parent fd, child fd): dup2'd in the child. Every other descriptor is O_CLOEXEC and stays
  // behind. Child fds 0, 1, 2 not listed are /dev/null.
  std::vector<std::pair<int, int>> fds;
  std::string cwd;           // empty: inherit
  bool new_session = false;  // setsid(): the child leads its own session and process group
  // unshare() flags tried in order in the child before exec; the first that succeeds wins.
  // When CLONE_NEWUSER is among them the child maps its own uid/gid 1:1 in the new namespace.
  // All failing makes Spawn fail with the last error (the command never starts).
  std::vector<int> unshare_attempts;
  bool loopback_up = false;  // after unshare(CLONE_NEWNET): bring `lo` up
  // setns(netns_fd, CLONE_NEWNET) in the child before anything else (-1: stay).
  int netns_fd = -1;
  // A private mount namespace in which each (source, target) file is bound read-only over the
  // target (e.g. a run's resolv.conf over /etc/resolv.conf). Needs CAP_SYS_ADMIN.
  std::vector<std::pair<std::string, std::string>> bind_files;
  // Empty every capability set (also for uid 0) and set no_new_privs, last before exec.
  bool drop_capabilities = false;
  // PR_SET_PDEATHSIG: the signal the child gets when this thread exits (0: none). Not for
  // bubblewrap: see launcher.cc.
  int parent_death_signal = 0;

  // A run's own host identity (identity/run_identity.h), applied in the child after its network
  // namespace and everything above, before chdir and exec, in this order:
  //   - mount_fd >= 0: a private mount namespace (slave of this one: nothing made in it reaches
  //     back, nothing needs unmounting after a crash) in which the detached mount `mount_fd` (the
  //     idmapped workspace) is attached at `mount_target`;
  //   - uid != -1: the bounding set emptied when drop_capabilities, every supplementary group
  //     dropped, then setresgid(gid) and setresuid(uid): the program starts as nobody's uid,
  //     holding no capability, and bubblewrap runs unprivileged. The user keyring of that uid is
  //     cleared (a run before this one with the same leased uid leaves nothing in it).
  int mount_fd = -1;
  std::string mount_target;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  // keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL), after the uid change: the program gets a new,
  // empty session keyring of its own, not the caller's (a launching shell's keys).
  bool new_session_keyring = false;
  // Limits (issue 15). Each descriptor is a cgroup.procs file opened for writing beforehand; the
  // child writes "0" (itself) into every one first of all, before any other step (before any
  // setuid, before exec): no instruction of the program runs outside its cgroup. A failed write
  // makes Spawn fail, and the program never starts.
  std::vector<int> cgroup_procs_fds;
  // Written to /proc/self/oom_score_adj in the child (nullopt: inherited). A run's processes get
  // 1000: the OOM killer takes them before the worker and its supervisors.
  std::optional<int> oom_score_adj;
  // RLIMIT_NOFILE (soft and hard) set in the child before exec; 0: inherited.
  uint64_t nofile_limit = 0;
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  // A moved-from ChildProcess owns nothing (its destructor must not reap the moved child).
  ChildProcess(ChildProcess&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)),
        pidfd_(std::move(other.pidfd_)),
        reaped_(std::exchange(other.reaped_, false)) {}
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  // Kills (SIGKILL) and reaps a child that was never waited for, so none is left behind.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }
  bool running() const { return pid_ > 0 && !reaped_; }

  // Blocks until the child exits and reaps it.
  Result<ExitStatus> Wait();
  // Waits at most `timeout`; nullopt when it is still running.
  Result<std::optional<ExitStatus>> WaitFor(std::chrono::milliseconds timeout);
  // Signals the child unless it has been reaped already (then a no-op).
  Status Signal(int sig);
  // SIGKILLs the child and every child of its own, stopping it first (SIGSTOP, waited for) so
  // that it makes no new one meanwhile. For a parent whose child waits on a word from it that a
  // SIGKILL to the parent alone would leave waiting forever (bubblewrap while it sets up).
  // Does not reap; Wait() still does.
  Status KillWithChildren();

 private:
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  bool reaped_ = false;
};

// Starts a child. Fails (and leaves nothing running) when the program cannot be executed:
// the errno of execve comes back through a close-on-exec pipe, as ENOENT → kNotFound,
// EACCES → kPermissionDenied, and a failed unshare names the call.
Result<ChildProcess> Spawn(const SpawnOptions& options);

// Runs a command to completion, capturing stdout and stderr together (tests and probes).
struct CommandOutput {
  ExitStatus status;
  std::string output;
};
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                 std::optional<std::vector<std::string>> env = std::nullopt);

// The pids of `pid`'s children: /proc/PID/task/*/children, or a scan of /proc where the
// kernel lacks that file (CONFIG_PROC_CHILDREN).
std::vector<pid_t> ChildrenOf(pid_t pid);
// The same from every process's /proc/PID/stat (the fallback; slower).
std::vector<pid_t> ChildrenOfFromStat(pid_t pid);

// OK when this process has exactly one thread; FailedPrecondition naming `who` otherwise. For
// callers about to fork a process that goes on running this program: a fork copies one thread,
// and a lock another thread held stays held in the copy forever.
Status RequireOneThread(std::string_view who);

// The current environment as KEY=VALUE strings.
std::vector<std::string> CurrentEnvironment();

}  // namespace codespace
