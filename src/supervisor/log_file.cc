#include "supervisor/log_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include <fmt/format.h>

namespace codespace {

// Incremental SHA-256 (OpenSSL EVP), hex out.
struct FileLogSink::Hash {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  Hash() { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
  ~Hash() { EVP_MD_CTX_free(ctx); }
  Hash(const Hash&) = delete;
  Hash& operator=(const Hash&) = delete;
  void Update(const void* d, size_t n) { EVP_DigestUpdate(ctx, d, n); }
  std::string Final() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    std::string hex;
    for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
    return hex;
  }
};

FileLogSink::FileLogSink(std::string path, UniqueFd fd)
    : path_(std::move(path)), fd_(std::move(fd)), hash_(std::make_unique<Hash>()) {}
FileLogSink::~FileLogSink() = default;

Result<std::unique_ptr<FileLogSink>> FileLogSink::Create(const std::string& path) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0640));
  return std::unique_ptr<FileLogSink>(new FileLogSink(path, std::move(fd)));
}

Status FileLogSink::Write(const char* data, size_t size) {
  if (!fd_) return FailedPreconditionError(fmt::format("{}: sealed", path_));
  Status s = WriteAll(fd_.get(), data, size);
  if (!s.ok()) {
    // What reached the file is what the digest covers: count the bytes that did.
    struct stat st;
    if (::fstat(fd_.get(), &st) == 0 && static_cast<uint64_t>(st.st_size) > bytes_) {
      size_t partial = static_cast<size_t>(static_cast<uint64_t>(st.st_size) - bytes_);
      if (partial <= size) {
        hash_->Update(data, partial);
        bytes_ += partial;
      }
    }
    return s.WithContext(path_);
  }
  hash_->Update(data, size);
  bytes_ += size;
  return OkStatus();
}

Result<LogDigest> FileLogSink::Seal() {
  if (!fd_) return FailedPreconditionError(fmt::format("{}: sealed already", path_));
  // fsync before the digest is published: a record must never vouch for bytes a crash loses.
  if (::fsync(fd_.get()) != 0) return ErrnoError(fmt::format("fsync({})", path_), errno);
  if (::fchmod(fd_.get(), 0440) != 0) return ErrnoError(fmt::format("fchmod({}, 0440)", path_), errno);
  fd_.reset();
  LogDigest d;
  d.bytes = bytes_;
  d.sha256 = hash_->Final();
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
    if (n < 0) return ErrnoError(fmt::format("read({})", path), errno);
    if (n == 0) break;
    h.Update(buf.data(), static_cast<size_t>(n));
  }
  return h.Final();
}

}  // namespace codespace
