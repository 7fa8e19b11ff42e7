// The mounts of a run's file-system view: a pure function of its FsView (run/fs_view.h) and the
// host's layout (which system directories are symlinks, which secrets exist, where
// /etc/resolv.conf leads), so every path a run sees is pinned by a table test
// (mount_list_test.cc); bwrap_args turns the mounts into bubblewrap flags. docs/view.md says
// why each is there.
//
// Default view, in order:
//   base   /usr read-only; /bin /sbin /lib /lib64 /lib32 /libx32 as the host has them (a
//          read-only bind of a directory, or the same symlink on merged-/usr hosts); /etc
//          read-only; its secrets masked; the synthetic /etc/passwd and /etc/group
//   proc   after bubblewrap's --proc: the host-wide settings read-only (/proc/sys, ...), the
//          kernel's memory and log surfaces masked (/proc/kcore, /proc/kmsg, ...)
//   extra  after /tmp and /var/tmp: a private /run, the file /etc/resolv.conf leads to when it
//          leads out of the view (systemd-resolved's file in /run), a private HOME
//   user   the spec's binds then its hides (bwrap_args orders them around the workspace)
// and the root itself (bubblewrap's own tmpfs) remounted read-only at the end.
// Host view: the same with `--ro-bind / /` as the base instead of the system directories, and
// no private /run or HOME (bubblewrap cannot make mount points in the read-only host root).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "run/fs_view.h"

namespace codespace {

// One step of a view, in bubblewrap's terms.
struct ViewMount {
  enum class Kind {
    kRoBind,         // --ro-bind source dest
    kBind,           // --bind source dest
    kSymlink,        // --symlink source(target text) dest
    kTmpfs,          // [--perms perms] --tmpfs dest
    kReadOnlyTmpfs,  // --tmpfs dest --remount-ro dest: an empty directory that refuses writes
    kMaskFile,       // --ro-bind /dev/null dest: reads nothing, refuses writes
    kRoData,         // --perms perms --ro-bind-data fd dest: a file made from an inherited fd
  };
  Kind kind = Kind::kRoBind;
  std::string source;
  std::string dest;
  int fd = -1;
  int perms = -1;  // octal mode; -1: bubblewrap's default
  friend bool operator==(const ViewMount&, const ViewMount&) = default;
};

// What one host path is (lstat), and for a symlink the path it resolves to (realpath; empty
// when it dangles) and what that is.
struct HostPath {
  enum class Kind { kAbsent, kDirectory, kFile, kSymlink };
  Kind kind = Kind::kAbsent;
  std::string link_text;  // readlink, for a symlink
  std::string resolved;   // realpath, for a symlink
  Kind resolved_kind = Kind::kAbsent;
};

// The host's layout, as far as the view cares: every path of ViewCandidatePaths(), looked up.
struct HostLayout {
  std::map<std::string, HostPath> paths;
  // /etc/ssh/ssh_host_*_key that exist (their names are not fixed: ed25519, rsa, ecdsa, ...).
  std::vector<std::string> ssh_host_keys;
  const HostPath& Lookup(const std::string& path) const;
};

// The paths whose kind BuildMountPlan asks about, for `view` (the hides, through the binds).
std::vector<std::string> ViewCandidatePaths(const FsView& view);

struct MountPlan {
  bool whole_host = false;  // --ro-bind / / before everything (the host view)
  std::vector<ViewMount> base;
  std::vector<ViewMount> proc;
  std::vector<ViewMount> extra;
  std::vector<ViewMount> user;
  bool read_only_root = false;  // --remount-ro / last (the default view's root is a tmpfs)
  std::string home;             // HOME inside (SandboxEnvironment gives it when the spec does not)
  friend bool operator==(const MountPlan&, const MountPlan&) = default;
};

// The fds bubblewrap reads the synthetic /etc/passwd and /etc/group from (it closes them once
// read: the command never holds them). Above codespace-init's status fd (3).
inline constexpr int kPasswdFd = 10;
inline constexpr int kGroupFd = 11;

MountPlan BuildMountPlan(const FsView& view, const HostLayout& host);

// Secrets masked in /etc in every view (files, and directories masked whole). docs/view.md.
const std::vector<std::string>& EtcSecrets();
// /proc entries made read-only, and masked, after bubblewrap's --proc.
const std::vector<std::string>& ProcReadOnly();
const std::vector<std::string>& ProcMasked();

}  // namespace codespace
