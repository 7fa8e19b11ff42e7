#include "sandbox/host_layout.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string_view>

namespace codespace {

namespace {

HostPath::Kind KindOf(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return HostPath::Kind::kDirectory;
  if (S_ISLNK(st.st_mode)) return HostPath::Kind::kSymlink;
  return HostPath::Kind::kFile;
}

}  // namespace

HostPath LookUpHostPath(const std::string& path) {
  HostPath p;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return p;
  p.kind = KindOf(st);
  if (p.kind != HostPath::Kind::kSymlink) return p;
  char text[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), text, sizeof(text) - 1);
  if (n > 0) p.link_text.assign(text, static_cast<size_t>(n));
  std::unique_ptr<char, decltype(&::free)> real(::realpath(path.c_str(), nullptr), &::free);
  if (real && ::stat(real.get(), &st) == 0) {
    p.resolved = real.get();
    p.resolved_kind = KindOf(st);
  }
  return p;
}

HostLayout ReadHostLayout(const FsView& view) {
  HostLayout host;
  for (const std::string& path : ViewCandidatePaths(view)) host.paths[path] = LookUpHostPath(path);
  if (DIR* d = ::opendir("/etc/ssh")) {
    while (dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (name.size() > 16 && name.substr(0, 9) == "ssh_host_" &&
          name.substr(name.size() - 4) == "_key") {
        std::string path = "/etc/ssh/" + std::string(name);
        host.ssh_host_keys.push_back(path);
        host.paths[path] = LookUpHostPath(path);
      }
    }
    ::closedir(d);
  }
  std::sort(host.ssh_host_keys.begin(), host.ssh_host_keys.end());  // readdir's order is not
  return host;
}

}  // namespace codespace
