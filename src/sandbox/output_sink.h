// OutputSink: where a run's stdout or stderr goes as it comes — the terminal of `codespace run`,
// or a log file that the supervisor seals. The launcher reads the sandbox's pipes and writes
// here, so that it sees every writer close (background descendants included).
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace codespace {

class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // Takes the next bytes of the stream. An error stops capture of this stream (the run goes on;
  // later bytes are drained and dropped) and is reported in the run's reason.
  [[nodiscard]] virtual Status Write(const char* data, size_t size) = 0;

  // What one PullFrom did.
  struct Pulled {
    size_t bytes = 0;  // read from the pipe and taken (0: nothing there now, or its end)
    bool end = false;  // every writer has closed the pipe (or reading it failed): done
  };
  // Reads once from `pipe_fd`, the read end of a non-blocking pipe, and takes what it read as
  // Write would. For the launcher's pump: a sink may read straight into memory of its own (the
  // log file's hashing queue) instead of taking a copy of the launcher's buffer. An error is the
  // sink's, as from Write (the bytes read are then lost); reading itself never fails the sink.
  // Default: one read into a 64 KiB buffer on the stack, then Write.
  [[nodiscard]] virtual Result<Pulled> PullFrom(int pipe_fd);
};

// One read() of `pipe_fd` (non-blocking) into `buf`, as PullFrom reports it: bytes = what was
// read (0 when nothing is there now); end at EOF or when reading fails (EINTR is retried).
OutputSink::Pulled ReadPipeOnce(int pipe_fd, char* buf, size_t size);

// Writes to a descriptor (e.g. the caller's own stdout), nothing else.
class FdSink : public OutputSink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  Status Write(const char* data, size_t size) override;

 private:
  int fd_;
};

}  // namespace codespace
