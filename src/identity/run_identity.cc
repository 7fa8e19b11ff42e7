#include "identity/run_identity.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "base/file_util.h"

namespace codespace {

std::string IdMapLine(uint32_t on_disk, uint32_t shown_as) {
  return fmt::format("{} {} 1\n", on_disk, shown_as);
}

namespace {

// mkdir that tolerates an existing directory, then sets owner and mode exactly (umask aside).
Status MakeDir(const std::string& path, mode_t mode, uid_t uid = 0, gid_t gid = 0) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return ErrnoError(fmt::format("mkdir({})", path), errno);
  }
  if (::chown(path.c_str(), uid, gid) != 0) {
    return ErrnoError(fmt::format("chown({}, {}:{})", path, uid, gid), errno);
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return ErrnoError(fmt::format("chmod({}, {:o})", path, mode), errno);
  }
  return OkStatus();
}

// The lease dir, narrowly: never a walk that could go down into a mounted workspace. The mount
// point is only ever mounted on in a launcher child's own mount namespace; should it be a mount
// here, it is left alone (and so is the dir).
Status RemoveLeaseDir(const std::string& dir) {
  const std::string mount_point = dir + "/workspace";
  struct statx sx {};
  if (::statx(AT_FDCWD, mount_point.c_str(), AT_SYMLINK_NOFOLLOW, 0, &sx) == 0 &&
      (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
      (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
    return FailedPreconditionError(fmt::format(
        "{} is a mount point in the worker's mount namespace: left alone", mount_point));
  }
  if (::rmdir(mount_point.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(fmt::format("rmdir({})", mount_point), errno);
  }
  // The relay dir is the run's own (an unconfined run may have put things in it); the walk
  // does not follow symlinks, and the run cannot mount anything in this namespace.
  RETURN_IF_ERROR(RemoveTree(dir + "/relay"));
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(fmt::format("rmdir({})", dir), errno);
  }
  return OkStatus();
}

}  // namespace

Result<UniqueFd> MakeMappingUserns(const std::string& uid_map, const std::string& gid_map) {
  ASSIGN_OR_RETURN(Pipe ready, MakePipe());
  ASSIGN_OR_RETURN(Pipe hold, MakePipe());
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork(user namespace helper)", errno);
  if (pid == 0) {
    // Only raw syscalls: the caller may have threads. It waits on `hold` until killed, or until
    // its caller dies (the death signal; and `hold` reads EOF once the caller's end is gone,
    // this copy of it closed here).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(0);
    ::close(hold.write.get());
    ::close(ready.read.get());
    char ok = ::unshare(CLONE_NEWUSER) == 0 ? 'u' : 'e';
    ssize_t ignored = ::write(ready.write.get(), &ok, 1);
    (void)ignored;
    char c;
    while (::read(hold.read.get(), &c, 1) < 0 && errno == EINTR) {
    }
    ::_exit(0);
  }
  ready.write.reset();
  auto reap = [pid] {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  };
  char word = 0;
  ssize_t n;
  do {
    n = ::read(ready.read.get(), &word, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1 || word != 'u') {
    reap();
    return FailedPreconditionError(
        "unshare(CLONE_NEWUSER) for the workspace's idmapping failed in its helper");
  }
  const std::string proc = fmt::format("/proc/{}", pid);
  Status s;
  auto write_map = [&](const char* file, const std::string& map) -> Status {
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFile((proc + "/" + file).c_str(), O_WRONLY));
    if (::write(fd.get(), map.data(), map.size()) != static_cast<ssize_t>(map.size())) {
      return ErrnoError(
          fmt::format("write({}/{}, \"{}\")", proc, file, map.substr(0, map.size() - 1)), errno);
    }
    return OkStatus();
  };
  s = write_map("uid_map", uid_map);
  if (s.ok()) s = write_map("gid_map", gid_map);
  Result<UniqueFd> ns =
      s.ok() ? OpenFile((proc + "/ns/user").c_str(), O_RDONLY) : Result<UniqueFd>(s);
  reap();
  return ns;
}

std::string FilesystemTypeOf(const std::string& path) {
  struct statx sx {};
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_MNT_ID, &sx) != 0 || !(sx.stx_mask & STATX_MNT_ID)) {
    return "unknown";
  }
  auto text = ReadFileToString("/proc/self/mountinfo");
  if (!text.ok()) return "unknown";
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    if (std::strtoull(line.c_str(), nullptr, 10) != sx.stx_mnt_id) continue;
    size_t sep = line.find(" - ");
    if (sep == std::string::npos) return "unknown";
    std::istringstream rest(line.substr(sep + 3));
    std::string type;
    rest >> type;
    return type.empty() ? "unknown" : type;
  }
  return "unknown";
}

Result<UniqueFd> IdmappedClone(const std::string& path, int userns_fd) {
  UniqueFd tree(
      ::open_tree(AT_FDCWD, path.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
  if (!tree) return ErrnoError(fmt::format("open_tree({}, OPEN_TREE_CLONE)", path), errno);
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  attr.userns_fd = static_cast<uint64_t>(userns_fd);
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) != 0) {
    int err = errno;
    return FailedPreconditionError(fmt::format(
        "the workspace {} is on {}, which cannot be idmapped for the run's own uid "
        "(mount_setattr(MOUNT_ATTR_IDMAP): {}); a root worker runs nothing as root: put the "
        "workspace on a filesystem that supports idmapped mounts (ext4, xfs, btrfs, tmpfs)",
        path, FilesystemTypeOf(path), ErrnoText(err)));
  }
  return tree;
}

Result<std::unique_ptr<RunIdentity>> RunIdentity::Prepare(const RunIdentityOptions& o) {
  std::unique_ptr<RunIdentity> id(new RunIdentity());
  // The run root is traversable by the run (its lease dir and relay are under it), readable
  // by nobody else. An existing one keeps its mode (another part of codespace may have made it).
  if (::access(o.run_root.c_str(), F_OK) != 0) RETURN_IF_ERROR(MakeDir(o.run_root, 0711));
  RETURN_IF_ERROR(MakeDir(o.run_root + "/ws", 0711));
  ASSIGN_OR_RETURN(id->lease_, UidLease::Acquire(o.run_root + "/uid-leases", o.range, o.proc_dir));
  const uid_t uid = id->uid();
  const gid_t gid = id->gid();
  id->dir_ = fmt::format("{}/ws/{}", o.run_root, uid);
  // What a crashed holder of this uid left. Its mounts were in its own mount namespace only.
  RETURN_IF_ERROR(RemoveLeaseDir(id->dir_));
  RETURN_IF_ERROR(MakeDir(id->dir_, 0711));
  RETURN_IF_ERROR(MakeDir(id->relay_dir(), 0700, uid, gid));
  if (!o.workspace.empty()) {
    RETURN_IF_ERROR(MakeDir(id->workspace_mount_point(), 0700));
    struct stat st {};
    if (::stat(o.workspace.c_str(), &st) != 0) {
      return ErrnoError(fmt::format("stat({})", o.workspace), errno);
    }
    ASSIGN_OR_RETURN(UniqueFd userns,
                     MakeMappingUserns(IdMapLine(st.st_uid, uid), IdMapLine(st.st_gid, gid)));
    ASSIGN_OR_RETURN(id->mount_, IdmappedClone(o.workspace, userns.get()));
  }
  return id;
}

Result<std::unique_ptr<RunIdentity>> PrepareRunIdentity(const std::string& workspace) {
  RunIdentityOptions o;
  ASSIGN_OR_RETURN(o.range, RunUidRangeFromEnvironment());
  o.workspace = workspace;
  return RunIdentity::Prepare(o);
}

RunIdentity::~RunIdentity() {
  mount_.reset();
  if (!dir_.empty()) RemoveLeaseDir(dir_).IgnoreError();
}

}  // namespace codespace
