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
};

// Writes to a descriptor (e.g. the caller's own stdout), nothing else.
class FdSink : public OutputSink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  Status Write(const char* data, size_t size) override;

 private:
  int fd_;
};

}  // namespace codespace
