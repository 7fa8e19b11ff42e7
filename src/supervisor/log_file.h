// FileLogSink: a run's stdout or stderr as a file in its run directory, written as it comes in
// bounded memory (the launcher's 64 KiB chunks), hashed as it is written, and sealed at the end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "run/log_digest.h"
#include "sandbox/output_sink.h"

namespace codespace {

class FileLogSink : public OutputSink {
 public:
  // Creates (truncates) `path`, mode 0640.
  static Result<std::unique_ptr<FileLogSink>> Create(const std::string& path);
  ~FileLogSink() override;

  Status Write(const char* data, size_t size) override;
  // Sealed: fsynced (the bytes are on disk before the record says so), made read-only, and its
  // size and sha256 — of exactly the bytes written — returned.
  [[nodiscard]] Result<LogDigest> Seal();

  struct Hash;  // incremental SHA-256; also behind Sha256Hex and Sha256OfFile

 private:
  FileLogSink(std::string path, UniqueFd fd);
  std::string path_;
  UniqueFd fd_;
  std::unique_ptr<Hash> hash_;
  uint64_t bytes_ = 0;
};

// The sha256 of a whole file (hex), for checks.
Result<std::string> Sha256OfFile(const std::string& path);
std::string Sha256Hex(std::string_view data);

}  // namespace codespace
