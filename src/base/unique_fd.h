// UniqueFd: the one owner of a file descriptor. Move-only; closes on destruction.
//
// Every descriptor codespace opens is O_CLOEXEC (or SOCK_CLOEXEC / pipe2(O_CLOEXEC)), so that no
// descriptor leaks into a sandbox by accident: what a child must inherit is passed explicitly.
#pragma once

#include <utility>

#include "base/status.h"

namespace codespace {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

// pipe2(O_CLOEXEC | extra_flags).
Result<Pipe> MakePipe(int extra_flags = 0);

// open(path, flags | O_CLOEXEC, mode), EINTR retried.
Result<UniqueFd> OpenFile(const char* path, int flags, unsigned mode = 0);

// Writes all of `data`, retrying short writes and EINTR.
Status WriteAll(int fd, const void* data, size_t size);
inline Status WriteAll(int fd, std::string_view data) {
  return WriteAll(fd, data.data(), data.size());
}

// Reads until EOF.
Result<std::string> ReadAll(int fd);

}  // namespace codespace
