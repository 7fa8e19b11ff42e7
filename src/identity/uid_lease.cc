#include "identity/uid_lease.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/file_util.h"

namespace codespace {

namespace {

struct flock ByteOf(const UidRange& range, uint32_t uid, short type) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = static_cast<off_t>(uid - range.first);
  l.l_len = 1;
  l.l_pid = 0;  // required for OFD locks
  return l;
}

// The four numbers after `key` on a /proc/PID/status line ("Uid:\t0\t0\t0\t0").
void AddIds(const std::string& status, const char* key, std::set<uint32_t>* out) {
  size_t at = status.find(key);
  if (at == std::string::npos) return;
  const char* p = status.c_str() + at + std::strlen(key);
  for (int i = 0; i < 4; ++i) {
    char* end = nullptr;
    unsigned long v = std::strtoul(p, &end, 10);
    if (end == p) return;
    out->insert(static_cast<uint32_t>(v));
    p = end;
  }
}

}  // namespace

std::set<uint32_t> LiveIds(const std::string& proc_dir) {
  std::set<uint32_t> ids;
  DIR* d = ::opendir(proc_dir.c_str());
  if (!d) return ids;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    auto status = ReadFileToString(proc_dir + "/" + e->d_name + "/status");
    if (!status.ok()) continue;  // gone meanwhile
    AddIds(*status, "\nUid:", &ids);
    AddIds(*status, "\nGid:", &ids);
  }
  ::closedir(d);
  return ids;
}

Result<UidLease> UidLease::Acquire(const std::string& lease_file, const UidRange& range,
                                   const std::string& proc_dir) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(lease_file.c_str(), O_RDWR | O_CREAT, 0600));
  const std::set<uint32_t> live = LiveIds(proc_dir);
  for (uint64_t i = 0; i < range.count; ++i) {
    const uint32_t uid = range.first + static_cast<uint32_t>(i);
    if (live.count(uid)) continue;  // a process still runs as it (a stranded sandbox)
    struct flock l = ByteOf(range, uid, F_WRLCK);
    if (::fcntl(fd.get(), F_OFD_SETLK, &l) == 0) return UidLease(std::move(fd), uid);
    if (errno != EAGAIN && errno != EACCES) {
      return ErrnoError(
          fmt::format("fcntl({}, F_OFD_SETLK, byte {})", lease_file, uid - range.first), errno);
    }
  }
  return UnavailableError(
      fmt::format("every run uid of {} is leased or still in use by a process; "
                  "widen {} or wait for runs to end",
                  range.ToString(), kRunUidsEnv));
}

bool UidLease::Held(const std::string& lease_file, const UidRange& range, uint32_t uid) {
  auto fd = OpenFile(lease_file.c_str(), O_RDWR);
  if (!fd.ok()) return false;
  struct flock l = ByteOf(range, uid, F_WRLCK);
  if (::fcntl(fd->get(), F_OFD_GETLK, &l) != 0) return false;
  return l.l_type != F_UNLCK;
}

}  // namespace codespace
