#include "probe/host_probe.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "base/file_util.h"
#include "base/process.h"
#include "identity/uid_range.h"
#include "limits/run_cgroup.h"
#include "net/netns.h"
#include "sandbox/bwrap_args.h"
#include "seccomp/seccomp_filter.h"

namespace codespace {

ProbeOptions ProbeOptionsFromEnvironment() {
  ProbeOptions o;
  o.bwrap_override = GetEnv("CODESPACE_BWRAP_PATH");
  o.path_env = GetEnv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  o.require_confinement = GetEnv("CODESPACE_REQUIRE_CONFINEMENT") == "1";
  auto limits = LimitSettingsFromEnvironment();
  if (limits.ok()) {
    o.limit_settings = *limits;
  } else {
    o.limit_settings_error = limits.status().message();
  }
  return o;
}

ConfinementProbe ProbeConfinement(const ProbeOptions& options) {
  ConfinementProbe p;
  Result<std::string> found = options.bwrap_override.empty()
                                  ? FindExecutable("bwrap", options.path_env)
                                  : FindExecutable(options.bwrap_override, options.path_env);
  if (!found.ok()) {
    p.error = options.bwrap_override.empty()
                  ? "bubblewrap (bwrap) not found on PATH"
                  : fmt::format("CODESPACE_BWRAP_PATH={} is not an executable file",
                                options.bwrap_override);
    return p;
  }
  p.bwrap_path = *found;
  // The trial sandbox binds / recursively and remounts every mount read-only, like a run's: a
  // run namespace removed meanwhile (/run/netns is shared) fails it, and the host would be
  // judged not to confine. Hold the lock every sandbox holds while setting up (net/netns.h).
  auto lock = NetnsMountLock::Shared();
  if (!lock.ok()) {
    p.error = fmt::format("trial sandbox: {}", lock.status().message());
    return p;
  }
  auto out = RunCommand(TrialSandboxArgv(p.bwrap_path), std::vector<std::string>{});
  lock->Release();
  if (!out.ok()) {
    p.error = fmt::format("trial sandbox did not start: {}", out.status().message());
    return p;
  }
  if (!out->status.success()) {
    std::string msg = out->output;
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    if (msg.size() > 200) msg.resize(200);
    p.error = fmt::format("trial sandbox {}: {}", out->status.ToString(),
                          msg.empty() ? "(no message)" : msg);
    return p;
  }
  p.confines = true;
  return p;
}

bool ProbeTools(const std::string& path_env, std::string* error) {
  for (const char* tool : {"ip", "nft"}) {
    if (!FindExecutable(tool, path_env).ok()) {
      *error = fmt::format("{} not found on PATH (install {})", tool,
                           std::string_view(tool) == "ip" ? "iproute2" : "nftables");
      return false;
    }
  }
  return true;
}

bool ProbeNamespace(std::string* error) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    *error = fmt::format("cannot create a network namespace: pipe2: {}", ErrnoText(errno));
    return false;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    *error = fmt::format("cannot create a network namespace: fork: {}", ErrnoText(err));
    return false;
  }
  if (pid == 0) {
    int err = ::unshare(CLONE_NEWNET) == 0 ? 0 : errno;
    ssize_t ignored = ::write(pipefd[1], &err, sizeof(err));
    (void)ignored;
    ::_exit(0);  // the namespace ends with this process
  }
  ::close(pipefd[1]);
  int err = -1;
  ssize_t n;
  do {
    n = ::read(pipefd[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  ::close(pipefd[0]);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof(err))) {
    *error = "cannot create a network namespace: the probe process died";
    return false;
  }
  if (err != 0) {
    *error = fmt::format("cannot create a network namespace: {}", ErrnoText(err));
    return false;
  }
  return true;
}

bool ProbeForwarding(const std::string& path, std::string* error) {
  auto value = ReadFileToString(path);
  if (!value.ok()) {
    *error = fmt::format("cannot read IPv4 forwarding setting: {}", value.status().message());
    return false;
  }
  std::string v = *value;
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  if (v == "1") return true;
  if (::access(path.c_str(), W_OK) == 0) return true;
  *error = fmt::format(
      "IPv4 forwarding is off ({} reads \"{}\") and cannot be turned on: {}; set "
      "net.ipv4.ip_forward=1 on the host",
      path, v, ErrnoText(errno));
  return false;
}

FilterParts FilterProbe(const std::string& path_env, const std::string& forwarding_path) {
  FilterParts p;
  p.tools = ProbeTools(path_env, &p.tools_error);
  p.namespace_ok = ProbeNamespace(&p.namespace_error);
  p.forwarding = ProbeForwarding(forwarding_path, &p.forwarding_error);
  return p;
}

LimitsFacts ProbeLimits(const ProbeOptions& options) {
  LimitsFacts l;
  l.settings = options.limit_settings;
  l.settings_error = options.limit_settings_error;
  CgroupLayout layout = DetectCgroupLayout(options.limit_settings.cgroup_root);
  l.hierarchy = layout.hierarchy;
  l.unavailable_reason = layout.reason;
  return l;
}

HostFacts ProbeHost(const ProbeOptions& options) {
  HostFacts f;
  f.uid = ::getuid();
  ConfinementProbe c = ProbeConfinement(options);
  f.confines = c.confines;
  f.bwrap_path = c.bwrap_path;
  f.confine_error = c.error;
  f.filter = FilterProbe(options.path_env, options.forwarding_path);
  f.verdict = DecideFilter(f.filter);
  f.require_confinement = options.require_confinement;
  ProbeIdentity(&f);
  f.limits = ProbeLimits(options);
  f.seccomp_error = SeccompUnavailableReason();
  return f;
}

void ProbeIdentity(HostFacts* f) {
  if (!PerRunIdentityHere()) {
    f->identity = "worker-uid";
    return;
  }
  f->identity = "per-run";
  auto range = RunUidRangeFromEnvironment();
  if (range.ok()) {
    f->run_uids = range->ToString();
  } else {
    f->run_uids = GetEnv(kRunUidsEnv, kDefaultRunUids);
    f->identity_error = range.status().message();
  }
  if (f->identity_error.empty()) f->identity_error = PerRunIdentityCapabilityError();
}

}  // namespace codespace
