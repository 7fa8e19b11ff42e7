#include "cli/log_follow.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace codespace {

size_t LogFollower::Pump() {
  size_t total = 0;
  std::vector<char> buf(1 << 16);
  for (int i = 0; i < 2; ++i) {
    if (!fds_[i]) {
      auto fd = OpenFile(paths_[i].c_str(), O_RDONLY);
      if (!fd.ok()) continue;  // not created yet
      fds_[i] = std::move(*fd);
    }
    for (;;) {
      ssize_t n = ::read(fds_[i].get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // at the current end: more may come
      WriteAll(targets_[i], buf.data(), static_cast<size_t>(n)).IgnoreError();
      total += static_cast<size_t>(n);
    }
  }
  return total;
}

}  // namespace codespace
