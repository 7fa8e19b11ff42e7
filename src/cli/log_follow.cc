#include "cli/log_follow.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace codespace {

size_t LogFollower::Pump() {
  size_t total = 0;
  for (int i = 0; i < 2; ++i) {
    if (!fds_[i]) {
      auto fd = OpenFile(paths_[i].c_str(), O_RDONLY);
      if (!fd.ok()) continue;  // not created yet
      fds_[i] = std::move(*fd);
    }
    total += Copy(i);
  }
  return total;
}

size_t LogFollower::Copy(int i) {
  size_t total = 0;
  // sendfile: the kernel moves the file's pages to the target without a pass through this
  // process (into a pipe by reference; into /dev/null not at all). A target that is not ready
  // (EAGAIN) gets the same bytes next time. One that takes no sendfile (opened O_APPEND, some
  // character devices) or fails otherwise gets read and write from then on, as it always did.
  while (!plain_copy_[i]) {
    ssize_t n = ::sendfile(targets_[i], fds_[i].get(), nullptr, kSendfileMax);
    if (n > 0) {
      total += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return total;  // at the current end: more may come
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return total;
    plain_copy_[i] = true;
  }
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(fds_[i].get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // at the current end: more may come
    WriteAll(targets_[i], buf.data(), static_cast<size_t>(n)).IgnoreError();
    total += static_cast<size_t>(n);
  }
  return total;
}

}  // namespace codespace
