#include "base/file_util.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "base/unique_fd.h"

namespace codespace {

Result<std::string> ReadFileToString(const std::string& path) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path.c_str(), O_RDONLY));
  auto data = ReadAll(fd.get());
  if (!data.ok()) return data.status().WithContext(path);
  return data;
}

Status WriteFileAtomically(const std::string& path, std::string_view contents, unsigned mode) {
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode));
    RETURN_IF_ERROR(WriteAll(fd.get(), contents));
    // fsync before rename: otherwise the rename can reach the disk before the data, and a crash
    // leaves `path` naming an empty or partial file.
    if (::fsync(fd.get()) != 0) return ErrnoError(fmt::format("fsync({})", tmp), errno);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(fmt::format("rename({}, {})", tmp, path), err);
  }
  // fsync the directory: the rename itself lives in the directory's data, and is not durable
  // until the directory is flushed.
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? std::string(".") : path.substr(0, slash == 0 ? 1 : slash);
  ASSIGN_OR_RETURN(UniqueFd dfd, OpenFile(dir.c_str(), O_RDONLY | O_DIRECTORY));
  if (::fsync(dfd.get()) != 0) return ErrnoError(fmt::format("fsync({})", dir), errno);
  return OkStatus();
}

Status ReplaceFileForThisBoot(const std::string& path, std::string_view contents, unsigned mode) {
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode));
    if (Status s = WriteAll(fd.get(), contents); !s.ok()) {
      ::unlink(tmp.c_str());
      return s;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(fmt::format("rename({}, {})", tmp, path), err);
  }
  return OkStatus();
}

Status MakeDirs(const std::string& path, unsigned mode) {
  if (path.empty()) return InvalidArgumentError("MakeDirs: empty path");
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoError(fmt::format("mkdir({})", partial), errno);
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(fmt::format("stat({})", path), errno);
  if (!S_ISDIR(st.st_mode))
    return FailedPreconditionError(fmt::format("{}: not a directory", path));
  return OkStatus();
}

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return OkStatus();
    return ErrnoError(fmt::format("lstat({})", path), errno);
  }
  auto remove_one = [](const char* p, const struct stat*, int, struct FTW*) -> int {
    return ::remove(p) == 0 || errno == ENOENT ? 0 : -1;
  };
  if (::nftw(path.c_str(), remove_one, 32, FTW_DEPTH | FTW_PHYS) != 0) {
    return ErrnoError(fmt::format("remove tree {}", path), errno);
  }
  return OkStatus();
}

namespace {
bool IsExecutableFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}
}  // namespace

Result<std::string> FindExecutable(std::string_view name, std::string_view path_env) {
  if (name.empty()) return InvalidArgumentError("empty executable name");
  if (name.find('/') != std::string_view::npos) {
    std::string p(name);
    if (IsExecutableFile(p)) return p;
    return NotFoundError(fmt::format("{}: no executable file there", name));
  }
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string_view::npos) end = path_env.size();
    std::string_view dir = path_env.substr(start, end - start);
    if (!dir.empty()) {
      std::string candidate = fmt::format("{}/{}", dir, name);
      if (IsExecutableFile(candidate)) return candidate;
    }
    start = end + 1;
  }
  return NotFoundError(fmt::format("{} not found on PATH", name));
}

std::string GetEnv(const char* name, std::string_view fallback) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string(fallback);
}

}  // namespace codespace
