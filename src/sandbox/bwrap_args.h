// The bubblewrap command line for a run: a pure function of the run's layout, so every flag that
// confines a run is pinned by a table test rather than discovered in a process listing.
#pragma once

#include <string>
#include <vector>

#include "sandbox/mount_list.h"

namespace codespace {

struct BwrapLayout {
  std::string bwrap_path;
  // No --unshare-net: the sandbox keeps the network namespace bubblewrap starts in — the
  // worker's (Shared) or the run's filtered one (Filtered). Otherwise a fresh, empty one.
  bool share_network = false;
  // Files bound read-only over paths inside (a filtered run's resolv.conf over /etc/resolv.conf).
  std::vector<std::pair<std::string, std::string>> ro_files;
  // What of the host the run sees (BuildMountPlan). Default-constructed: nothing at all — no
  // programs, so a layout that forgot its view runs nothing rather than seeing the host.
  MountPlan view;
  // Absolute; bound read-write and the working directory. Empty: none (the trial sandbox).
  std::string workspace;
  // Where bubblewrap binds the workspace from (identity/: a root worker's idmapped workspace,
  // attached at the run's lease dir); empty: the workspace itself.
  std::string workspace_source;
  // Paths hidden behind an empty read-only tmpfs (the worker's state dir: other runs' records
  // and logs), where the view shows them: anywhere in the host view; in the default view only
  // inside the workspace or a bind of the same path (elsewhere they are not there to hide).
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
  // Limits (issue 15). tmp_bytes: /tmp and /var/tmp each a tmpfs of at most this size (bubblewrap
  // --size; 0: the kernel's default, half of RAM). in_cgroup: the run is held by a cgroup of its
  // own, so its cgroup namespace is required (--unshare-cgroup: a kernel without it fails the
  // run instead of showing it the host's hierarchy) and the cgroup file systems are masked
  // (an empty read-only tmpfs over /sys/fs/cgroup): nothing inside can see or write any cgroup.
  uint64_t tmp_bytes = 0;
  bool in_cgroup = false;
};

// bwrap --unshare-user --disable-userns --unshare-pid --unshare-ipc --unshare-uts
//      --unshare-cgroup-try [--unshare-net] --die-with-parent --new-session
//      --uid 1000 --gid 1000
//      [--ro-bind / /] <view.base> --dev /dev --proc /proc <view.proc>
//      --tmpfs /tmp --tmpfs /var/tmp <view.extra> [--ro-bind file dest]...
//      [--ro-bind init /dev/.codespace-init] <view.user holding ws> [--bind ws ws --chdir ws]
//      <view.user> [--tmpfs hidden --remount-ro hidden]... [--remount-ro /]
//      --clearenv --setenv K V... --cap-drop ALL [--seccomp N] -- cmd
//
// --uid/--gid: the run is an ordinary user inside (sandbox/inside_user.h), whatever host uid
// bubblewrap runs as.
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
// network namespaces, every other flag too) running /bin/true, in the host view (a pure
// function cannot know the host's layout; the view's mounts are the launch's to fail on).
std::vector<std::string> TrialSandboxArgv(const std::string& bwrap_path);

// The environment a run gets: exactly its own variables, plus PATH when it set none (a command
// must be findable; the default names only system directories).
std::vector<std::string> SandboxEnvironment(const std::vector<std::string>& run_env);
// The same, plus HOME=`home` when the run set no HOME (its view's private HOME).
std::vector<std::string> SandboxEnvironment(const std::vector<std::string>& run_env,
                                            const std::string& home);
inline constexpr const char* kSandboxInitPath = "/dev/.codespace-init";
inline constexpr const char* kDefaultSandboxPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

}  // namespace codespace
