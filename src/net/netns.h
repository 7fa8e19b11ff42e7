// Named network namespaces (/run/netns/NAME, as iproute2 keeps them) made and removed in-process,
// and running code inside one. No `ip` process is spawned: a thread unshares or enters the
// namespace (network namespaces are per thread), so the caller's own namespace never changes.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace codespace {

inline constexpr const char* kNetnsRunDir = "/run/netns";

std::string NetnsPath(const std::string& name);

// Creates /run/netns/NAME holding a new, empty network namespace (only a down `lo`), and
// returns an fd on it. kAlreadyExists when the name is taken. Nothing is left on failure.
Result<UniqueFd> CreateNamedNetns(const std::string& name);

// An fd on an existing named namespace.
Result<UniqueFd> OpenNamedNetns(const std::string& name);

// Unmounts and removes /run/netns/NAME. Missing is fine (teardown is idempotent). The namespace
// itself ends when nothing else holds it (its veths go with it).
Status DeleteNamedNetns(const std::string& name);

// Serialises removing a named namespace against starting a sandbox. bubblewrap binds the whole
// root recursively and then remounts each mount read-only, one by one, from its own list; when a
// /run/netns/<name> mount of another run is removed in between (removals propagate: /run/netns
// is a shared mount), that remount fails and the sandbox does not start. Sandboxes hold the lock
// shared while they set up their mounts; DeleteNamedNetns holds it exclusively.
class NetnsMountLock {
 public:
  // Shared: for a starting sandbox. A process that cannot create the lock file (an unprivileged
  // worker, which never removes namespaces either) gets a lock that holds nothing.
  static Result<NetnsMountLock> Shared();
  static Result<NetnsMountLock> Exclusive();
  void Release() { fd_.reset(); }

 private:
  explicit NetnsMountLock(UniqueFd fd) : fd_(std::move(fd)) {}
  static Result<NetnsMountLock> Take(int operation);
  UniqueFd fd_;
};

// Runs `fn` on a thread that has entered `netns_fd`, and returns its status.
Status RunInNetns(int netns_fd, const std::function<Status()>& fn);

}  // namespace codespace
