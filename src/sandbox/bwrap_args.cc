#include "sandbox/bwrap_args.h"

#include <string_view>

namespace codespace {

namespace {

// `dir` is `path` or one of its ancestors.
bool Contains(std::string_view dir, std::string_view path) {
  if (path.empty() || dir.empty()) return false;
  if (dir == path) return true;
  std::string_view d = dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir;
  return path.size() > d.size() && path.substr(0, d.size()) == d && path[d.size()] == '/';
}

void Hide(const std::string& dir, std::vector<std::string>* a) {
  for (const std::string& f : {std::string("--tmpfs"), dir, std::string("--remount-ro"), dir}) {
    a->push_back(f);
  }
}

}  // namespace

std::vector<std::string> BuildBwrapArgv(const BwrapLayout& l) {
  std::vector<std::string> a = {l.bwrap_path,  "--unshare-user",  "--disable-userns",
                                "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                                "--unshare-cgroup-try"};
  if (!l.share_network) a.push_back("--unshare-net");
  for (const char* f : {"--die-with-parent", "--new-session"}) a.push_back(f);
  for (const char* f : {"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs",
                        "/tmp", "--tmpfs", "/var/tmp"}) {
    a.push_back(f);
  }
  for (const auto& [from, to] : l.ro_files) {
    for (const std::string& f : {std::string("--ro-bind"), from, to}) a.push_back(f);
  }
  if (!l.init_path.empty()) {
    a.push_back("--ro-bind");
    a.push_back(l.init_path);
    a.push_back(kSandboxInitPath);
  }
  for (const auto& d : l.hidden_dirs) {
    if (Contains(d, l.workspace)) Hide(d, &a);
  }
  if (!l.workspace.empty()) {
    // After the tmpfs mounts, so a workspace under /tmp or a hidden dir is still bound.
    for (const auto& s : {std::string("--bind"), l.workspace, l.workspace, std::string("--chdir"),
                          l.workspace}) {
      a.push_back(s);
    }
  } else {
    a.push_back("--chdir");
    a.push_back("/");
  }
  // After the workspace bind, so that a hidden dir inside the workspace stays hidden. One that
  // holds the workspace was masked before the bind (above), or the bind would vanish under it.
  for (const auto& d : l.hidden_dirs) {
    if (!Contains(d, l.workspace)) Hide(d, &a);
  }
  a.push_back("--clearenv");
  for (const auto& kv : l.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;  // validated earlier; never pass junk
    a.push_back("--setenv");
    a.push_back(kv.substr(0, eq));
    a.push_back(kv.substr(eq + 1));
  }
  a.push_back("--cap-drop");
  a.push_back("ALL");
  if (l.seccomp_fd >= 0) {
    a.push_back("--seccomp");
    a.push_back(std::to_string(l.seccomp_fd));
  }
  a.push_back("--");
  for (const auto& c : l.command) a.push_back(c);
  return a;
}

std::vector<std::string> TrialSandboxArgv(const std::string& bwrap_path) {
  BwrapLayout l;
  l.bwrap_path = bwrap_path;
  l.env = SandboxEnvironment({});
  l.command = {"/bin/true"};
  return BuildBwrapArgv(l);
}

std::vector<std::string> SandboxEnvironment(const std::vector<std::string>& run_env) {
  std::vector<std::string> env = run_env;
  bool has_path = false;
  for (const auto& kv : env) has_path |= std::string_view(kv).substr(0, 5) == "PATH=";
  if (!has_path) env.push_back(std::string("PATH=") + kDefaultSandboxPath);
  return env;
}

}  // namespace codespace
