// Streams a run's stdout and stderr files to two descriptors as they grow (`codespace run`,
// `codespace logs --follow`), live or sealed.
#pragma once

#include <string>

#include "base/unique_fd.h"

namespace codespace {

class LogFollower {
 public:
  LogFollower(std::string stdout_path, std::string stderr_path, int out_fd, int err_fd)
      : paths_{std::move(stdout_path), std::move(stderr_path)}, targets_{out_fd, err_fd} {}
  // Copies whatever is new in either file; returns how many bytes it copied.
  size_t Pump();

 private:
  static constexpr size_t kSendfileMax = 16 << 20;
  size_t Copy(int i);

  std::string paths_[2];
  int targets_[2];
  UniqueFd fds_[2];
  bool plain_copy_[2] = {false, false};  // the target takes no sendfile: read and write
};

}  // namespace codespace
