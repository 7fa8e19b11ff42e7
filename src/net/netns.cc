#include "net/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include <fmt/format.h>

namespace codespace {

std::string NetnsPath(const std::string& name) { return fmt::format("{}/{}", kNetnsRunDir, name); }

namespace {

// /run/netns must be a shared mount point, as iproute2 makes it: a namespace bound there is then
// visible in mount namespaces created later (and `ip netns` agrees with us).
Status EnsureNetnsRunDir() {
  if (::mkdir(kNetnsRunDir, 0755) != 0 && errno != EEXIST) {
    return ErrnoError(fmt::format("mkdir({})", kNetnsRunDir), errno);
  }
  if (::mount("", kNetnsRunDir, "none", MS_SHARED | MS_REC, nullptr) == 0) return OkStatus();
  if (errno != EINVAL) return ErrnoError(fmt::format("mount(--make-rshared {})", kNetnsRunDir), errno);
  // Not a mount point yet: bind it onto itself, then share it.
  if (::mount(kNetnsRunDir, kNetnsRunDir, "none", MS_BIND | MS_REC, nullptr) != 0) {
    return ErrnoError(fmt::format("mount(--bind {0} {0})", kNetnsRunDir), errno);
  }
  if (::mount("", kNetnsRunDir, "none", MS_SHARED | MS_REC, nullptr) != 0) {
    return ErrnoError(fmt::format("mount(--make-rshared {})", kNetnsRunDir), errno);
  }
  return OkStatus();
}

}  // namespace

Result<UniqueFd> CreateNamedNetns(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
    return InvalidArgumentError(fmt::format("invalid namespace name \"{}\"", name));
  }
  RETURN_IF_ERROR(EnsureNetnsRunDir());
  const std::string path = NetnsPath(name);
  {
    int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
    if (fd < 0) return ErrnoError(fmt::format("create {}", path), errno);
    ::close(fd);
  }
  Status made;
  std::thread t([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      made = ErrnoError("unshare(CLONE_NEWNET)", errno);
      return;
    }
    if (::mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0) {
      made = ErrnoError(fmt::format("mount(--bind /proc/thread-self/ns/net {})", path), errno);
    }
  });
  t.join();  // the thread's namespace lives on through the bind mount
  if (!made.ok()) {
    ::unlink(path.c_str());
    return made;
  }
  auto fd = OpenNamedNetns(name);
  if (!fd.ok()) DeleteNamedNetns(name).IgnoreError();
  return fd;
}

Result<UniqueFd> OpenNamedNetns(const std::string& name) {
  return OpenFile(NetnsPath(name).c_str(), O_RDONLY);
}

Result<NetnsMountLock> NetnsMountLock::Take(int operation) {
  constexpr const char* kDir = "/run/codespace";
  constexpr const char* kPath = "/run/codespace/netns-mounts.lock";
  if (::mkdir(kDir, 0755) != 0 && errno != EEXIST) {
    if (errno == EACCES || errno == EPERM) return NetnsMountLock(UniqueFd());
    return ErrnoError(fmt::format("mkdir({})", kDir), errno);
  }
  int fd = ::open(kPath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 && operation == LOCK_SH) fd = ::open(kPath, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == EACCES || errno == EPERM || errno == ENOENT) return NetnsMountLock(UniqueFd());
    return ErrnoError(fmt::format("open({})", kPath), errno);
  }
  UniqueFd owned(fd);
  while (::flock(owned.get(), operation) != 0) {
    if (errno != EINTR) return ErrnoError(fmt::format("flock({})", kPath), errno);
  }
  return NetnsMountLock(std::move(owned));
}

Result<NetnsMountLock> NetnsMountLock::Shared() { return Take(LOCK_SH); }
Result<NetnsMountLock> NetnsMountLock::Exclusive() { return Take(LOCK_EX); }

Status DeleteNamedNetns(const std::string& name) {
  const std::string path = NetnsPath(name);
  ASSIGN_OR_RETURN(NetnsMountLock lock, NetnsMountLock::Exclusive());
  if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    return ErrnoError(fmt::format("umount2({}, MNT_DETACH)", path), errno);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(fmt::format("unlink({})", path), errno);
  }
  return OkStatus();
}

Status RunInNetns(int netns_fd, const std::function<Status()>& fn) {
  Status result;
  std::thread t([&] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      result = ErrnoError("setns(CLONE_NEWNET)", errno);
      return;
    }
    result = fn();
  });
  t.join();
  return result;
}

}  // namespace codespace
