// The bubblewrap command line for a run: a pure function of the run's layout, so every flag that
// confines a run is pinned by a table test rather than discovered in a process listing.
#pragma once

#include <string>
#include <vector>

namespace codespace {

struct BwrapLayout {
  std::string bwrap_path;
  // No --unshare-net: the sandbox keeps the network namespace bubblewrap starts in — the
  // worker's (Shared) or the run's filtered one (Filtered). Otherwise a fresh, empty one.
  bool share_network = false;
  // Files bound read-only over paths inside (a filtered run's resolv.conf over /etc/resolv.conf).
  std::vector<std::pair<std::string, std::string>> ro_files;
  // Absolute; bound read-write and the working directory. Empty: none (the trial sandbox).
  std::string workspace;
  // Paths hidden behind an empty read-only tmpfs (the worker's state dir: other runs' records
  // and logs).
  // Only existing directories may be listed; bubblewrap cannot create mount points in the
  // read-only root.
  std::vector<std::string> hidden_dirs;
  std::vector<std::string> env;  // KEY=VALUE: the whole environment inside
  // codespace-init on the host, bound read-only at kSandboxInitPath: inside the sandbox's own
  // /dev, which no workspace can cover (admission refuses a workspace under /dev), so the bind
  // creates nothing in a host directory. The host path itself may sit in /tmp or a hidden dir,
  // which the sandbox does not see. Empty: the command runs directly.
  std::string init_path;
  // The descriptor (inside bubblewrap) holding the run's compiled syscall filter, which
  // bubblewrap loads last before it execs the command: `--seccomp N`. -1: none (the trial).
  int seccomp_fd = -1;
  std::vector<std::string> command;
};

// bwrap --unshare-user --disable-userns --unshare-pid --unshare-ipc --unshare-uts
//      --unshare-cgroup-try [--unshare-net] --die-with-parent --new-session
//      --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /var/tmp
//      [--ro-bind init /dev/.codespace-init] [--bind ws ws --chdir ws] [--tmpfs hidden --remount-ro
//      hidden]...
//      --clearenv --setenv K V... --cap-drop ALL [--seccomp N] -- cmd
//
// Why each: own user namespace so that even a root worker's run holds no capability that counts
// outside it, and --disable-userns so it cannot make a nested one to regain some; --cap-drop ALL
// empties effective, permitted, inheritable, ambient and bounding sets (also for uid 0); own pid
// namespace so it neither sees nor signals the host's processes and dies whole when its init is
// killed; --new-session so it cannot push keystrokes into the caller's terminal (TIOCSTI);
// --die-with-parent so a dead launcher leaves no sandbox behind. No --info-fd: bubblewrap dies
// on a write there whose reader is gone, before it lets its child go on, and that child would
// then wait forever (the launcher finds the sandbox's init as bubblewrap's child instead).
std::vector<std::string> BuildBwrapArgv(const BwrapLayout& layout);

// The trial sandbox that decides `confines`: the same confinement as a severed run (own user and
// network namespaces, every other flag too) running /bin/true.
std::vector<std::string> TrialSandboxArgv(const std::string& bwrap_path);

// The environment a run gets: exactly its own variables, plus PATH when it set none (a command
// must be findable; the default names only system directories).
std::vector<std::string> SandboxEnvironment(const std::vector<std::string>& run_env);
inline constexpr const char* kSandboxInitPath = "/dev/.codespace-init";
inline constexpr const char* kDefaultSandboxPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

}  // namespace codespace
