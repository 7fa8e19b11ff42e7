#include "run/fs_view.h"

#include <fmt/format.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <memory>

namespace codespace {

std::string_view FsViewKindName(FsViewKind kind) {
  return kind == FsViewKind::kHost ? "host" : "default";
}

Result<FsViewKind> ParseFsViewKind(std::string_view text) {
  if (text == "default") return FsViewKind::kDefault;
  if (text == "host") return FsViewKind::kHost;
  return InvalidArgumentError(
      fmt::format("file-system view \"{}\": expected default or host", text));
}

FsBind ParseBindFlag(std::string_view value, bool read_only) {
  FsBind b;
  b.read_only = read_only;
  size_t colon = value.find(':');
  b.source = std::string(value.substr(0, colon));
  b.destination = colon == std::string_view::npos ? b.source : std::string(value.substr(colon + 1));
  return b;
}

bool PathContains(std::string_view dir, std::string_view path) {
  if (dir.empty() || path.empty()) return false;
  if (dir == "/") return path.front() == '/';
  return path == dir ||
         (path.size() > dir.size() && path.substr(0, dir.size()) == dir && path[dir.size()] == '/');
}

std::string MountSourceOf(const std::vector<FsBind>& binds, const std::string& path) {
  for (auto b = binds.rbegin(); b != binds.rend(); ++b) {
    if (PathContains(b->destination, path)) return b->source + path.substr(b->destination.size());
  }
  return path;
}

namespace {

// Why `path` is not absolute and normalised; empty when it is.
std::string PathProblem(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.find('\0') != std::string_view::npos) return "holds a NUL byte";
  if (path.front() != '/') return "is not an absolute path";
  if (path == "/") return "";
  for (size_t pos = 1; pos <= path.size();) {
    size_t next = path.find('/', pos);
    if (next == std::string_view::npos) next = path.size();
    std::string_view part = path.substr(pos, next - pos);
    if (part == "..") return "escapes through \"..\"";
    if (part.empty() || part == ".") return "is not a normalised path";
    pos = next + 1;
  }
  return "";
}

// Why nothing may be mounted at `dest` inside the run; empty when it may.
std::string DestinationProblem(std::string_view dest, std::string_view workspace) {
  if (dest == "/") return "would cover the whole view";
  // The kernel's file systems and the sandbox's own: codespace-init and the broker socket are
  // bound in /dev, and /proc's settings are kept read-only.
  for (std::string_view forbidden : {"/proc", "/dev", "/sys"}) {
    if (PathContains(forbidden, dest)) return fmt::format("is under {}", forbidden);
  }
  if (!workspace.empty() && dest == workspace) return "is the workspace itself";
  return "";
}

}  // namespace

std::optional<FsViewError> ValidateFsView(const FsView& view, std::string_view workspace) {
  for (size_t i = 0; i < view.binds.size(); ++i) {
    const FsBind& b = view.binds[i];
    const char* flag = b.read_only ? "--ro-bind" : "--bind";
    const std::string field = fmt::format("fs.binds[{}]", i);
    if (std::string p = PathProblem(b.source); !p.empty()) {
      return FsViewError{fmt::format("{} source \"{}\" {}", flag, b.source, p), field + ".source"};
    }
    if (std::string p = PathProblem(b.destination); !p.empty()) {
      return FsViewError{fmt::format("{} destination \"{}\" {}", flag, b.destination, p),
                         field + ".destination"};
    }
    if (std::string p = DestinationProblem(b.destination, workspace); !p.empty()) {
      return FsViewError{fmt::format("{} destination \"{}\" {}", flag, b.destination, p),
                         field + ".destination"};
    }
  }
  for (size_t i = 0; i < view.hides.size(); ++i) {
    const std::string& h = view.hides[i];
    const std::string field = fmt::format("fs.hide[{}]", i);
    if (std::string p = PathProblem(h); !p.empty()) {
      return FsViewError{fmt::format("--hide \"{}\" {}", h, p), field};
    }
    if (std::string p = DestinationProblem(h, workspace); !p.empty()) {
      return FsViewError{fmt::format("--hide \"{}\" {}", h, p), field};
    }
  }
  return std::nullopt;
}

namespace {

std::string RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&::free)> r(::realpath(path.c_str(), nullptr), &::free);
  return r ? std::string(r.get()) : std::string();
}

}  // namespace

std::optional<FsViewError> CheckFsViewOnHost(const FsView& view, const std::string& state_dir) {
  const std::string state = state_dir.empty() ? "" : RealPath(state_dir);
  for (size_t i = 0; i < view.binds.size(); ++i) {
    const FsBind& b = view.binds[i];
    const char* flag = b.read_only ? "--ro-bind" : "--bind";
    const std::string field = fmt::format("fs.binds[{}].source", i);
    std::string real = RealPath(b.source);
    if (real.empty()) {
      return FsViewError{fmt::format("{} source \"{}\": {}", flag, b.source, ErrnoText(errno)),
                         field};
    }
    if (real != b.source) {
      return FsViewError{fmt::format("{} source \"{}\" resolves to \"{}\" (a symlink on the path)",
                                     flag, b.source, real),
                         field};
    }
    if (!state.empty() && (PathContains(real, state) || PathContains(state, real))) {
      return FsViewError{
          fmt::format("{} source \"{}\" would show the worker's state dir {} (every run's "
                      "records and logs)",
                      flag, b.source, state_dir),
          field};
    }
  }
  for (size_t i = 0; i < view.hides.size(); ++i) {
    const std::string& h = view.hides[i];
    std::string host = MountSourceOf(view.binds, h);
    struct stat st {};
    if (::lstat(host.c_str(), &st) != 0) {
      return FsViewError{
          fmt::format("--hide \"{}\": {} on the host: {}", h, host, ErrnoText(errno)),
          fmt::format("fs.hide[{}]", i)};
    }
  }
  return std::nullopt;
}

std::optional<FsViewError> CheckFsView(const FsView& view, std::string_view workspace,
                                       const std::string& state_dir) {
  if (auto e = ValidateFsView(view, workspace)) return e;
  return CheckFsViewOnHost(view, state_dir);
}

}  // namespace codespace
