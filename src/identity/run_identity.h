// RunIdentity: what one run is on a root worker's host — a uid and gid of its own, leased
// (uid_lease.h), a directory of its own for the lease's life, and its workspace idmapped so
// that the run can write it while every file it creates is stored as the workspace's owner.
//
//   <run root>/                   /run/codespace: 0711 root where this makes it
//   <run root>/uid-leases         the lease file, 0600 root
//   <run root>/ws/                0711 root
//   <run root>/ws/<uid>/          0711 root: the lease holder's (removed at the end, and by the
//                                 next holder of the uid after a crash)
//   <run root>/ws/<uid>/workspace 0700 root: where the sandbox's launcher child attaches the
//                                 idmapped workspace, in a mount namespace of its own (the
//                                 mount exists nowhere else; nothing to unmount after a crash)
//   <run root>/ws/<uid>/relay/    0700 uid:gid: the run's relay sockets (only that uid passes)
//
// Directories are named by uid, not run id: a lease dir belongs to whoever holds the lease, so
// a crashed holder's dir is removed by the next one, never while its own run still lives
// (removing a directory another mount namespace mounts on detaches that mount).
//
// The idmapped mount: a detached clone of the workspace (open_tree OPEN_TREE_CLONE), set
// MOUNT_ATTR_IDMAP through a user namespace whose maps are "O L 1" / "G L 1": on-disk owner O
// is shown as the run's uid L, and what L creates is stored as O. nosuid and nodev as well.
// Cost: O(1) in the workspace's size. A filesystem that cannot be idmapped refuses the run
// (never run as root instead). Files owned by anyone but O show as the overflow uid (65534).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "identity/uid_lease.h"
#include "identity/uid_range.h"

namespace codespace {

inline constexpr char kRunRoot[] = "/run/codespace";

struct RunIdentityOptions {
  std::string run_root = kRunRoot;
  UidRange range;
  std::string workspace;  // absolute; empty: no workspace to map
  std::string proc_dir = "/proc";
};

class RunIdentity {
 public:
  static Result<std::unique_ptr<RunIdentity>> Prepare(const RunIdentityOptions& options);
  // Removes the lease dir, then releases the lease.
  ~RunIdentity();
  RunIdentity(const RunIdentity&) = delete;
  RunIdentity& operator=(const RunIdentity&) = delete;

  uid_t uid() const { return lease_.uid(); }
  gid_t gid() const { return lease_.uid(); }
  // The detached idmapped clone of the workspace (-1: none); the launcher's child attaches it.
  int workspace_mount_fd() const { return mount_.get(); }
  // Closed once attached (the child has its own copy of the descriptor until exec).
  void CloseWorkspaceMount() { mount_.reset(); }
  const std::string& dir() const { return dir_; }
  std::string workspace_mount_point() const { return dir_ + "/workspace"; }
  std::string relay_dir() const { return dir_ + "/relay"; }

 private:
  RunIdentity() = default;
  // Declared first, destroyed last: the lease outlives the directory it owns.
  UidLease lease_;
  std::string dir_;
  UniqueFd mount_;
};

// A root worker's run: the range from the environment (RunUidRangeFromEnvironment: checked
// against the host's accounts), leased under kRunRoot.
Result<std::unique_ptr<RunIdentity>> PrepareRunIdentity(const std::string& workspace);

// "ON_DISK SHOWN_AS 1\n": the one-line uid_map/gid_map of an idmapped mount's user namespace.
std::string IdMapLine(uint32_t on_disk, uint32_t shown_as);

// A user namespace with the given maps (a forked helper unshares it and is killed once its
// namespace is open): the descriptor of /proc/<helper>/ns/user.
Result<UniqueFd> MakeMappingUserns(const std::string& uid_map, const std::string& gid_map);

// A detached, recursive clone of `path`, idmapped through `userns_fd`, nosuid and nodev. The
// error names the filesystem when it cannot be idmapped.
Result<UniqueFd> IdmappedClone(const std::string& path, int userns_fd);

// The filesystem type of the mount `path` is on ("ext4", "tmpfs"...), from /proc/self/mountinfo;
// "unknown" when it cannot be told.
std::string FilesystemTypeOf(const std::string& path);

}  // namespace codespace
