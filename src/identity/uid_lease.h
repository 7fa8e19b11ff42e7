// UidLease: one host uid of a UidRange, held by one live run at a time.
//
// The mechanism: one host-wide lease file (/run/codespace/uid-leases), in which the holder of
// uid `first + i` holds a write lock on byte i. The lock is an open-file-description lock
// (F_OFD_SETLK), not a classic POSIX one (F_SETLK), because:
//   - the kernel drops it when its last descriptor closes, which happens when the holder dies,
//     however it dies: no sweep, no stale entry after a crash, no pid to be reused;
//   - two leases taken in one process conflict like any others (classic locks of one process
//     never conflict with each other, and closing any descriptor of the file would drop all of
//     them);
//   - a child forked by the holder shares the description until it execs (close-on-exec) or
//     exits, so a child stranded between fork and exec still holds the lease while it may still
//     become the uid.
// The lock alone does not prove the uid unused: a sandbox stranded by a supervisor that died
// (its processes running as the uid, its lease gone with the supervisor) must not share its
// uid with a new run. So a uid is taken only when no process of the host runs with it (any of
// its real, effective, saved and file-system uids, /proc/PID/status). Such a process could only
// be made by a holder of the lease, so looking once before locking is enough.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "identity/uid_range.h"

namespace codespace {

class UidLease {
 public:
  UidLease() = default;
  UidLease(UidLease&&) noexcept = default;
  UidLease& operator=(UidLease&&) noexcept = default;
  // Released by closing the descriptor.
  ~UidLease() = default;

  // Leases the lowest uid of `range` that nobody holds and no live process uses. Creates
  // `lease_file` (0600) if needed. kUnavailable when every uid is taken.
  static Result<UidLease> Acquire(const std::string& lease_file, const UidRange& range,
                                  const std::string& proc_dir = "/proc");
  // Whether some open file description holds `uid`'s lease now.
  static bool Held(const std::string& lease_file, const UidRange& range, uint32_t uid);

  uint32_t uid() const { return uid_; }
  bool valid() const { return fd_.valid(); }

 private:
  UidLease(UniqueFd fd, uint32_t uid) : fd_(std::move(fd)), uid_(uid) {}
  UniqueFd fd_;
  uint32_t uid_ = 0;
};

// Every uid some process of `proc_dir` runs with (real, effective, saved, fs) and every gid
// likewise.
std::set<uint32_t> LiveIds(const std::string& proc_dir);

}  // namespace codespace
