#include "supervisor/log_file.h"

// SHA256_*, deprecated in OpenSSL 3 (see FileLogSink::Hash): before any OpenSSL header.
#define OPENSSL_SUPPRESS_DEPRECATED

#include <fcntl.h>
#include <openssl/sha.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace codespace {

// Incremental SHA-256, hex out.
//
// OpenSSL's low-level SHA256_* calls, not EVP: a process's first EVP digest loads openssl.cnf and
// initialises the default provider, ~2 ms measured here, and every supervisor is a new process
// that would pay it on its launch path (bench item 1). The low-level calls go straight to the
// same block function (SHA extensions included): equal throughput, ~25 us to set up. OpenSSL 3
// marks them deprecated, not removed; this file alone opts in.
struct FileLogSink::Hash {
  SHA256_CTX ctx;
  Hash() { SHA256_Init(&ctx); }
  Hash(const Hash&) = delete;
  Hash& operator=(const Hash&) = delete;
  void Update(const void* d, size_t n) { SHA256_Update(&ctx, d, n); }
  std::string Final() {
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256_Final(md, &ctx);
    std::string hex;
    hex.reserve(2 * sizeof(md));
    for (unsigned char b : md) hex += fmt::format("{:02x}", b);
    return hex;
  }
};

// The hashing thread and its bounded queue of chunks.
//
// SHA-256 costs about as much CPU as writing the bytes does (~0.8 s per GiB here, with the SHA
// extensions); on its own thread it runs beside the writes instead of after each of them. The
// chunks are filled by the caller (read from the pipe straight into one), written to the file
// from there, and hashed from there too: the bytes hashed are the bytes written.
class FileLogSink::Hasher {
 public:
  explicit Hasher(const Options& o)
      : chunk_bytes_(std::max<size_t>(o.chunk_bytes, 1)),
        max_chunks_(std::max<size_t>(o.max_chunks, 1)),
        before_hash_(o.before_hash),
        inline_left_(o.hash_inline_first) {}
  ~Hasher() { Finish(); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  size_t chunk_bytes() const { return chunk_bytes_; }

  // A chunk to fill: a free one, a new one while fewer than max_chunks exist, else the next one
  // the hashing thread frees (the wait that bounds memory).
  char* Acquire() {
    std::unique_lock lock(mu_);
    if (free_.empty() && chunks_.size() < max_chunks_) {
      chunks_.push_back(std::make_unique_for_overwrite<char[]>(chunk_bytes_));
      return chunks_.back().get();
    }
    freed_.wait(lock, [&] { return !free_.empty(); });
    char* chunk = free_.back();  // the most recently used: still in cache
    free_.pop_back();
    return chunk;
  }

  // Gives back a chunk unhashed.
  void Release(char* chunk) {
    std::lock_guard lock(mu_);
    free_.push_back(chunk);
  }

  // Hashes the first `size` bytes of `chunk` after everything submitted before; the chunk is
  // free again once they are.
  void Submit(char* chunk, size_t size) {
    if (inline_left_ >= size) {
      inline_left_ -= size;
    } else {
      inline_left_ = 0;  // past the first bytes: the thread from now on, if one can be had
      if (!thread_.joinable() && !no_thread_) Start();
    }
    if (!thread_.joinable()) {  // still within the first bytes, or no thread to be had
      hash_.Update(chunk, size);
      Release(chunk);
      return;
    }
    {
      std::lock_guard lock(mu_);
      queued_.emplace_back(chunk, size);
    }
    work_.notify_one();
  }

  // Hashes what is still queued, ends the thread, and returns the digest (hex). Idempotent.
  std::string Finish() {
    if (!finished_) {
      if (thread_.joinable()) {
        {
          std::lock_guard lock(mu_);
          closing_ = true;
        }
        work_.notify_one();
        thread_.join();
      }
      digest_ = hash_.Final();
      finished_ = true;
    }
    return digest_;
  }

  size_t allocated() const {
    std::lock_guard lock(mu_);
    return chunks_.size();
  }

 private:
  void Start() {
    // Signals stay with the supervisor's main thread (its handlers and waits expect them
    // there): the thread starts with all of them blocked.
    sigset_t all, old;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
      thread_ = std::thread([this] { Run(); });
    } catch (const std::system_error&) {
      no_thread_ = true;  // no thread to be had (a task limit): hash on the caller's
    }
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  void Run() {
    for (;;) {
      std::pair<char*, size_t> next;
      {
        std::unique_lock lock(mu_);
        work_.wait(lock, [&] { return !queued_.empty() || closing_; });
        if (queued_.empty()) return;
        next = queued_.front();
        queued_.pop_front();
      }
      if (before_hash_) before_hash_();
      hash_.Update(next.first, next.second);
      {
        std::lock_guard lock(mu_);
        free_.push_back(next.first);
      }
      freed_.notify_one();
    }
  }

  const size_t chunk_bytes_;
  const size_t max_chunks_;
  const std::function<void()> before_hash_;
  uint64_t inline_left_;  // the caller's thread's

  mutable std::mutex mu_;
  std::condition_variable work_;   // a chunk was queued, or closing_
  std::condition_variable freed_;  // a chunk was freed
  std::vector<std::unique_ptr<char[]>> chunks_;
  std::vector<char*> free_;
  std::deque<std::pair<char*, size_t>> queued_;
  bool closing_ = false;

  // The caller's before the hashing thread starts and after it ends; the thread's in between.
  Hash hash_;
  std::thread thread_;
  bool no_thread_ = false;
  bool finished_ = false;
  std::string digest_;
};

FileLogSink::FileLogSink(std::string path, UniqueFd fd, Options options)
    : path_(std::move(path)),
      fd_(std::move(fd)),
      options_(std::move(options)),
      hasher_(std::make_unique<Hasher>(options_)) {}
FileLogSink::~FileLogSink() = default;

Result<std::unique_ptr<FileLogSink>> FileLogSink::Create(const std::string& path) {
  return Create(path, Options{});
}

Result<std::unique_ptr<FileLogSink>> FileLogSink::Create(const std::string& path, Options options) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0640));
  return std::unique_ptr<FileLogSink>(new FileLogSink(path, std::move(fd), std::move(options)));
}

size_t FileLogSink::chunks_allocated() const { return hasher_->allocated(); }

Status FileLogSink::Write(const char* data, size_t size) {
  if (!fd_) return FailedPreconditionError(fmt::format("{}: sealed", path_));
  while (size > 0) {
    size_t n = std::min(size, hasher_->chunk_bytes());
    char* chunk = hasher_->Acquire();
    std::memcpy(chunk, data, n);
    RETURN_IF_ERROR(WriteChunk(chunk, n));
    data += n;
    size -= n;
  }
  return OkStatus();
}

Result<OutputSink::Pulled> FileLogSink::PullFrom(int pipe_fd) {
  if (!fd_) return FailedPreconditionError(fmt::format("{}: sealed", path_));
  char* chunk = hasher_->Acquire();
  Pulled p = ReadPipeOnce(pipe_fd, chunk, hasher_->chunk_bytes());
  if (p.bytes == 0) {
    hasher_->Release(chunk);
    return p;
  }
  RETURN_IF_ERROR(WriteChunk(chunk, p.bytes));
  return p;
}

Status FileLogSink::WriteChunk(char* chunk, size_t size) {
  size_t done = 0;
  Status failed;
  while (done < size) {
    ssize_t n = ::write(fd_.get(), chunk + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      failed = ErrnoError(fmt::format("write({})", path_), err);
      break;
    }
    if (n == 0) {
      failed = InternalError(fmt::format("write({}): wrote nothing", path_));
      break;
    }
    done += static_cast<size_t>(n);
  }
  // What reached the file is what the digest covers: after a short write and a failure (disk
  // full), the bytes before it.
  if (done > 0) {
    hasher_->Submit(chunk, done);
  } else {
    hasher_->Release(chunk);
  }
  bytes_ += done;
  if (options_.writeback_every > 0 && bytes_ - writeback_from_ >= options_.writeback_every) {
    StartWriteback();
  }
  return failed;
}

void FileLogSink::StartWriteback() {
  // Write-back of what was written since the last call starts now, on this thread, without
  // waiting for it: a 1 GiB log is then mostly on disk by the time it is sealed, and the seal's
  // fsync waits for the tail only. This is no durability promise (the fsync is); and it never
  // waits (SYNC_FILE_RANGE_WAIT_*), so it cannot consume a write-back error that the fsync must
  // still report. If it fails, the fsync at the seal writes (or fails) the rest.
  if (writeback_failed_) return;
  if (::sync_file_range(fd_.get(), static_cast<off64_t>(writeback_from_),
                        static_cast<off64_t>(bytes_ - writeback_from_),
                        SYNC_FILE_RANGE_WRITE) != 0) {
    writeback_failed_ = true;
  }
  writeback_from_ = bytes_;
}

Result<LogDigest> FileLogSink::Seal() {
  if (!fd_) return FailedPreconditionError(fmt::format("{}: sealed already", path_));
  // The order, and why:
  //  1. Every byte taken is in the file already (written on the caller's thread, before Write
  //     or PullFrom returned) and queued for hashing; the hashing thread works through the
  //     queue meanwhile.
  //  2. fsync: waits for the write-back of all of it (mostly started long since, by
  //     StartWriteback) and for the file's size and extents in the journal. After it, exactly
  //     the bytes written are on disk.
  //  3. The hashing thread is joined: the digest is of exactly those bytes.
  //  4. Only then is the digest returned for the record: a record never vouches for bytes a
  //     crash could lose. A failed fsync fails the seal, for good (the kernel reports a lost
  //     write-back once: a second fsync could succeed without the bytes).
  int synced = ::fsync(fd_.get());
  int err = errno;
  std::string sha256 = hasher_->Finish();
  if (synced != 0) {
    fd_.reset();
    return ErrnoError(fmt::format("fsync({})", path_), err);
  }
  if (::fchmod(fd_.get(), 0440) != 0) {
    err = errno;
    return ErrnoError(fmt::format("fchmod({}, 0440)", path_), err);
  }
  fd_.reset();
  LogDigest d;
  d.bytes = bytes_;
  d.sha256 = std::move(sha256);
  d.sealed = true;
  return d;
}

std::string Sha256Hex(std::string_view data) {
  FileLogSink::Hash h;
  h.Update(data.data(), data.size());
  return h.Final();
}

Result<std::string> Sha256OfFile(const std::string& path) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path.c_str(), O_RDONLY));
  FileLogSink::Hash h;
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      return ErrnoError(fmt::format("read({})", path), err);
    }
    if (n == 0) break;
    h.Update(buf.data(), static_cast<size_t>(n));
  }
  return h.Final();
}

}  // namespace codespace
