#include "sandbox/mount_list.h"

#include "sandbox/inside_user.h"

namespace codespace {

namespace {

using Kind = ViewMount::Kind;
using PathKind = HostPath::Kind;

// The system's programs and libraries. /usr always; the rest as the host has them (merged-/usr
// Debian: symlinks into /usr).
const char* const kSystemDirs[] = {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"};

ViewMount Mount(Kind kind, std::string source, std::string dest) {
  ViewMount m;
  m.kind = kind;
  m.source = std::move(source);
  m.dest = std::move(dest);
  return m;
}

// Whether `path` on the host shows at the same path in the default view's base.
bool InDefaultBase(const std::string& path, const HostLayout& host) {
  if (PathContains("/usr", path) || PathContains("/etc", path)) return true;
  for (const char* d : kSystemDirs) {
    if (host.Lookup(d).kind == PathKind::kDirectory && PathContains(d, path)) return true;
  }
  return false;
}

// Masks `path` by what it is on the host: a directory behind an empty read-only tmpfs,
// anything else behind /dev/null read-only. A symlink is masked where it leads, when that is in
// the view (a mount on a symlink lands on its target; one leading out of the view has nothing
// to mask, and bubblewrap could not mount there). Absent: nothing to mask.
void Mask(const std::string& path, const HostLayout& host, bool whole_host,
          std::vector<ViewMount>* out) {
  const HostPath& p = host.Lookup(path);
  std::string at = path;
  PathKind kind = p.kind;
  if (kind == PathKind::kSymlink) {
    if (p.resolved.empty() || !(whole_host || InDefaultBase(p.resolved, host))) return;
    at = p.resolved;
    kind = p.resolved_kind;
  }
  if (kind == PathKind::kDirectory) out->push_back(Mount(Kind::kReadOnlyTmpfs, "", at));
  if (kind == PathKind::kFile) out->push_back(Mount(Kind::kMaskFile, "/dev/null", at));
}

ViewMount Data(int fd, std::string dest) {
  ViewMount m = Mount(Kind::kRoData, "", std::move(dest));
  m.fd = fd;
  m.perms = 0644;
  return m;
}

}  // namespace

const HostPath& HostLayout::Lookup(const std::string& path) const {
  static const HostPath kAbsent;
  auto it = paths.find(path);
  return it == paths.end() ? kAbsent : it->second;
}

const std::vector<std::string>& EtcSecrets() {
  // Password hashes and their backups (and the backups of passwd/group, which the synthetic
  // files replace), sudo's rules, the host's SSH and TLS private keys, old password hashes,
  // codespace's own configuration (an API token may live there), Kerberos, VPN and network
  // credentials, and certbot's keys.
  static const std::vector<std::string> kSecrets = {
      "/etc/shadow",           "/etc/shadow-",          "/etc/gshadow",
      "/etc/gshadow-",         "/etc/passwd-",          "/etc/group-",
      "/etc/sudoers",          "/etc/sudoers.d",        "/etc/ssl/private",
      "/etc/security/opasswd", "/etc/codespace",        "/etc/krb5.keytab",
      "/etc/ipsec.secrets",    "/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets",
      "/etc/wireguard",        "/etc/letsencrypt",      "/etc/NetworkManager/system-connections",
      "/etc/pki/tls/private",
  };
  return kSecrets;
}

const std::vector<std::string>& ProcReadOnly() {
  // Host-wide settings and the kernel's own interfaces: /proc/sys above all (bubblewrap leaves
  // it writable for a run whose host uid is 0: kernel.core_pattern would run a program as host
  // root), and what bubblewrap covers itself only when the directory passes access(W_OK).
  static const std::vector<std::string> kReadOnly = {
      "/proc/sys",     "/proc/sysrq-trigger", "/proc/irq",    "/proc/bus", "/proc/fs",
      "/proc/sysvipc", "/proc/pressure",      "/proc/driver", "/proc/tty",
  };
  return kReadOnly;
}

const std::vector<std::string>& ProcMasked() {
  // The kernel's memory, log, keyring and timers, and the hardware's: nothing a run needs, and
  // for a run whose host uid is 0 several are readable (root-owned 0400) without a capability.
  static const std::vector<std::string> kMasked = {
      "/proc/kcore",       "/proc/kmsg",        "/proc/kallsyms",    "/proc/keys",
      "/proc/key-users",   "/proc/timer_list",  "/proc/sched_debug", "/proc/latency_stats",
      "/proc/timer_stats", "/proc/slabinfo",    "/proc/vmallocinfo", "/proc/kpagecount",
      "/proc/kpageflags",  "/proc/kpagecgroup", "/proc/acpi",        "/proc/scsi",
      "/proc/asound",
  };
  return kMasked;
}

std::vector<std::string> ViewCandidatePaths(const FsView& view) {
  std::vector<std::string> paths = {"/usr", "/etc", "/etc/resolv.conf"};
  for (const char* d : kSystemDirs) paths.push_back(d);
  for (const auto* list : {&EtcSecrets(), &ProcReadOnly(), &ProcMasked()}) {
    paths.insert(paths.end(), list->begin(), list->end());
  }
  for (const std::string& h : view.hides) paths.push_back(MountSourceOf(view.binds, h));
  return paths;
}

MountPlan BuildMountPlan(const FsView& view, const HostLayout& host) {
  MountPlan plan;
  const bool whole_host = view.kind == FsViewKind::kHost;
  plan.whole_host = whole_host;
  plan.read_only_root = !whole_host;
  plan.home = whole_host ? kInsideHostViewHome : kInsideHome;
  if (!whole_host) {
    if (host.Lookup("/usr").kind == PathKind::kDirectory) {
      plan.base.push_back(Mount(Kind::kRoBind, "/usr", "/usr"));
    }
    for (const char* d : kSystemDirs) {
      const HostPath& p = host.Lookup(d);
      if (p.kind == PathKind::kDirectory) plan.base.push_back(Mount(Kind::kRoBind, d, d));
      if (p.kind == PathKind::kSymlink) plan.base.push_back(Mount(Kind::kSymlink, p.link_text, d));
    }
    plan.base.push_back(Mount(Kind::kRoBind, "/etc", "/etc"));
  }
  for (const std::string& s : EtcSecrets()) Mask(s, host, whole_host, &plan.base);
  for (const std::string& k : host.ssh_host_keys) Mask(k, host, whole_host, &plan.base);
  plan.base.push_back(Data(kPasswdFd, "/etc/passwd"));
  plan.base.push_back(Data(kGroupFd, "/etc/group"));

  for (const std::string& p : ProcReadOnly()) {
    PathKind k = host.Lookup(p).kind;
    if (k == PathKind::kDirectory || k == PathKind::kFile) {
      plan.proc.push_back(Mount(Kind::kRoBind, p, p));
    }
  }
  for (const std::string& p : ProcMasked()) Mask(p, host, /*whole_host=*/true, &plan.proc);

  if (!whole_host) {
    plan.extra.push_back(Mount(Kind::kTmpfs, "", "/run"));
    // systemd-resolved: /etc/resolv.conf is a symlink into /run. The file it leads to is bound
    // at its own path in the private /run, so the symlink keeps working.
    const HostPath& resolv = host.Lookup("/etc/resolv.conf");
    if (resolv.kind == PathKind::kSymlink && resolv.resolved_kind == PathKind::kFile &&
        !InDefaultBase(resolv.resolved, host)) {
      plan.extra.push_back(Mount(Kind::kRoBind, resolv.resolved, resolv.resolved));
    }
    ViewMount home = Mount(Kind::kTmpfs, "", kInsideHome);
    home.perms = 0700;
    plan.extra.push_back(home);
  }

  for (const FsBind& b : view.binds) {
    plan.user.push_back(Mount(b.read_only ? Kind::kRoBind : Kind::kBind, b.source, b.destination));
  }
  for (const std::string& h : view.hides) {
    // Looked up on the host where the view shows it from; masked at the view's path.
    const HostPath& p = host.Lookup(MountSourceOf(view.binds, h));
    PathKind kind = p.kind == PathKind::kSymlink ? p.resolved_kind : p.kind;
    if (kind == PathKind::kDirectory) plan.user.push_back(Mount(Kind::kReadOnlyTmpfs, "", h));
    if (kind == PathKind::kFile) plan.user.push_back(Mount(Kind::kMaskFile, "/dev/null", h));
  }
  return plan;
}

}  // namespace codespace
