// FileLogSink: a run's stdout or stderr as a file in its run directory, written as it comes in
// bounded memory, hashed as it is written, and sealed at the end.
//
// Capture goes at about the speed of writing the file: the bytes are written on the caller's
// thread (a follower of the file sees them at once) and hashed on a thread of the sink's own,
// fed by a bounded queue of chunks. When the hashing falls behind, the caller waits for a free
// chunk, the sandbox's pipe fills and its writer blocks: memory never grows with the output.
// The file's write-back is started every few MiB, so that the seal's fsync waits for the tail
// only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "run/log_digest.h"
#include "sandbox/output_sink.h"

namespace codespace {

class FileLogSink : public OutputSink {
 public:
  struct Options {
    // The hashing queue: at most `max_chunks` chunks of `chunk_bytes` each, allocated as the
    // output needs them (4 MiB in all by default; a quiet stream holds one). A chunk takes a
    // whole output pipe (1 MiB) in one read: 64 KiB chunks cost 20% more time per GiB here.
    size_t chunk_bytes = 1024 * 1024;
    size_t max_chunks = 4;
    // The first this many bytes are hashed as they are written, on the caller's thread: a run
    // that prints a little (most runs, and nearly every stderr) never starts the hashing thread.
    uint64_t hash_inline_first = 1024 * 1024;
    // Start write-back (sync_file_range) whenever this much has been written since the last
    // start; 0: never (the seal's fsync writes it all).
    uint64_t writeback_every = 8 * 1024 * 1024;
    // Test seam: called on the hashing thread before each chunk is hashed.
    std::function<void()> before_hash;
  };

  // Creates (truncates) `path`, mode 0640.
  static Result<std::unique_ptr<FileLogSink>> Create(const std::string& path);
  static Result<std::unique_ptr<FileLogSink>> Create(const std::string& path, Options options);
  ~FileLogSink() override;

  // Both put the bytes in the file before they return, and count and hash exactly what reached
  // it: after a failed write (disk full), the bytes before the failure. The error names the
  // call, the file and errno's text.
  Status Write(const char* data, size_t size) override;
  Result<Pulled> PullFrom(int pipe_fd) override;  // reads straight into a chunk: no extra copy
  // Sealed: fsynced (the bytes are on disk before the record says so), made read-only, and its
  // size and sha256 — of exactly the bytes written — returned.
  [[nodiscard]] Result<LogDigest> Seal();

  // Chunks allocated so far (never more than Options::max_chunks), for tests.
  size_t chunks_allocated() const;

  struct Hash;  // incremental SHA-256; also behind Sha256Hex and Sha256OfFile

 private:
  class Hasher;
  FileLogSink(std::string path, UniqueFd fd, Options options);
  // Writes `size` bytes of `chunk` (one of the hasher's) to the file and hands what reached it
  // to the hasher.
  Status WriteChunk(char* chunk, size_t size);
  void StartWriteback();

  std::string path_;
  UniqueFd fd_;
  Options options_;
  std::unique_ptr<Hasher> hasher_;
  uint64_t bytes_ = 0;
  uint64_t writeback_from_ = 0;  // bytes before this offset have had write-back started
  bool writeback_failed_ = false;
};

// The sha256 of a whole file (hex), for checks.
Result<std::string> Sha256OfFile(const std::string& path);
std::string Sha256Hex(std::string_view data);

}  // namespace codespace
