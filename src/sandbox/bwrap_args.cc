#include "sandbox/bwrap_args.h"

#include <string>
#include <string_view>

#include "sandbox/inside_user.h"

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

std::string Octal(int perms) {
  std::string s;
  for (int shift = 9; shift >= 0; shift -= 3)
    s.push_back(static_cast<char>('0' + ((perms >> shift) & 7)));
  return s;
}

void Emit(const ViewMount& m, std::vector<std::string>* a) {
  using Kind = ViewMount::Kind;
  auto add = [a](std::initializer_list<std::string> flags) {
    a->insert(a->end(), flags.begin(), flags.end());
  };
  if (m.perms >= 0 && (m.kind == Kind::kTmpfs || m.kind == Kind::kRoData)) {
    add({"--perms", Octal(m.perms)});
  }
  switch (m.kind) {
    case Kind::kRoBind:
      add({"--ro-bind", m.source, m.dest});
      break;
    case Kind::kBind:
      add({"--bind", m.source, m.dest});
      break;
    case Kind::kSymlink:
      add({"--symlink", m.source, m.dest});
      break;
    case Kind::kTmpfs:
      add({"--tmpfs", m.dest});
      break;
    case Kind::kReadOnlyTmpfs:
      Hide(m.dest, a);
      break;
    case Kind::kMaskFile:
      add({"--ro-bind", "/dev/null", m.dest});
      break;
    case Kind::kRoData:
      add({"--ro-bind-data", std::to_string(m.fd), m.dest});
      break;
  }
}

// Whether the view shows host path `dir` at the same path (so that hiding it there is needed).
bool Shows(const BwrapLayout& l, const std::string& dir) {
  if (l.view.whole_host || Contains(l.workspace, dir)) return true;
  for (const auto* list : {&l.view.base, &l.view.user}) {
    for (const ViewMount& m : *list) {
      bool bind = m.kind == ViewMount::Kind::kRoBind || m.kind == ViewMount::Kind::kBind;
      if (bind && m.source == m.dest && Contains(m.source, dir)) return true;
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> BuildBwrapArgv(const BwrapLayout& l) {
  std::vector<std::string> a = {l.bwrap_path,  "--unshare-user",  "--disable-userns",
                                "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                                l.in_cgroup ? "--unshare-cgroup" : "--unshare-cgroup-try"};
  if (!l.share_network) a.push_back("--unshare-net");
  for (const char* f : {"--die-with-parent", "--new-session"}) a.push_back(f);
  for (const std::string& f : {std::string("--uid"), std::to_string(kInsideUid),
                               std::string("--gid"), std::to_string(kInsideGid)}) {
    a.push_back(f);
  }
  if (l.view.whole_host) {
    for (const char* f : {"--ro-bind", "/", "/"}) a.push_back(f);
  }
  for (const ViewMount& m : l.view.base) Emit(m, &a);
  for (const char* f : {"--dev", "/dev", "--proc", "/proc"}) a.push_back(f);
  for (const ViewMount& m : l.view.proc) Emit(m, &a);
  for (const char* f : {"--tmpfs", "/tmp", "--tmpfs", "/var/tmp"}) a.push_back(f);
  for (const ViewMount& m : l.view.extra) Emit(m, &a);
  // Limits: sized tmpfs over the unsized ones (before any bind that may lie under /tmp), and the
  // cgroup file systems masked where the view shows them (the host view; the default has no /sys).
  if (l.tmp_bytes) {
    for (const char* dir : {"/tmp", "/var/tmp"}) {
      for (const std::string& f : {std::string("--size"), std::to_string(l.tmp_bytes),
                                   std::string("--tmpfs"), std::string(dir)}) {
        a.push_back(f);
      }
    }
  }
  if (l.in_cgroup && Shows(l, "/sys/fs/cgroup")) Hide("/sys/fs/cgroup", &a);
  for (const auto& [from, to] : l.ro_files) {
    for (const std::string& f : {std::string("--ro-bind"), from, to}) a.push_back(f);
  }
  if (!l.init_path.empty()) {
    a.push_back("--ro-bind");
    a.push_back(l.init_path);
    a.push_back(kSandboxInitPath);
  }
  for (const auto& d : l.hidden_dirs) {
    if (Contains(d, l.workspace) && Shows(l, d)) Hide(d, &a);
  }
  // The spec's binds and hides: one that holds the workspace before its bind (or the workspace
  // would vanish under it), the others after (so that one inside the workspace shows).
  for (const ViewMount& m : l.view.user) {
    if (Contains(m.dest, l.workspace)) Emit(m, &a);
  }
  if (!l.workspace.empty()) {
    // After the tmpfs mounts, so a workspace under /tmp or a hidden dir is still bound.
    const std::string& source = l.workspace_source.empty() ? l.workspace : l.workspace_source;
    for (const auto& s :
         {std::string("--bind"), source, l.workspace, std::string("--chdir"), l.workspace}) {
      a.push_back(s);
    }
  } else {
    a.push_back("--chdir");
    a.push_back("/");
  }
  // After the workspace bind, so that a hidden dir inside the workspace stays hidden. One that
  // holds the workspace was masked before the bind (above), or the bind would vanish under it.
  for (const ViewMount& m : l.view.user) {
    if (!Contains(m.dest, l.workspace)) Emit(m, &a);
  }
  for (const auto& d : l.hidden_dirs) {
    if (!Contains(d, l.workspace) && Shows(l, d)) Hide(d, &a);
  }
  // Last: bubblewrap's own root tmpfs (the default view's /) refuses new files from here on.
  if (l.view.read_only_root) {
    a.push_back("--remount-ro");
    a.push_back("/");
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
  l.view.whole_host = true;
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

namespace codespace {

std::vector<std::string> SandboxEnvironment(const std::vector<std::string>& run_env,
                                            const std::string& home) {
  std::vector<std::string> env = SandboxEnvironment(run_env);
  bool has_home = false;
  for (const auto& kv : env) has_home |= std::string_view(kv).substr(0, 5) == "HOME=";
  if (!has_home && !home.empty()) env.push_back("HOME=" + home);
  return env;
}

}  // namespace codespace
