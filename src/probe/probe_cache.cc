#include "probe/probe_cache.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "base/clock.h"
#include "base/file_util.h"
#include "sandbox/bwrap_args.h"
#include "seccomp/seccomp_filter.h"

namespace codespace {

namespace {

constexpr std::string_view kMagic = "codespace-probe-cache 1";

std::string ReadOr(const std::string& path, std::string_view missing) {
  auto text = ReadFileToString(path);
  return text.ok() ? *text : std::string(missing);
}

// FNV-1a: the mount table can be long; the key needs only to change when it does.
uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string StatusLines(const std::string& status, std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view name : names) {
    size_t at = status.find(fmt::format("\n{}:", name));
    if (at == std::string::npos) continue;
    size_t end = status.find('\n', at + 1);
    out += status.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    out += ';';
  }
  return out;
}

// The mount table without namespace pins (nsfs mounts: every filtered run adds one under
// /run/netns for its life), which change nothing a probe depends on and would otherwise make
// every run of a busy worker look like another host.
std::string MountsWithoutNamespacePins() {
  std::string all = ReadOr("/proc/self/mountinfo", "");
  std::string kept;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\n', start);
    if (end == std::string::npos) end = all.size();
    std::string_view line(all.data() + start, end - start);
    if (line.find(" - nsfs ") == std::string_view::npos) {
      kept.append(line);
      kept += '\n';
    }
    start = end + 1;
  }
  return kept;
}

std::string NamespaceId(const char* which) {
  char buf[64];
  ssize_t n = ::readlink(fmt::format("/proc/self/ns/{}", which).c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "-";
}

std::string BinaryId(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return "none";
  return fmt::format("{} dev={} ino={} size={} mtime={}.{} mode={:o} uid={}", path, st.st_dev,
                     st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_mode,
                     st.st_uid);
}

// One field per line: "name value"; values are single-line by construction (escaped below).
std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1];
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::string ProbeCacheKey(const ProbeOptions& options) {
  std::string status = "\n" + ReadOr("/proc/self/status", "");
  auto bwrap = options.bwrap_override.empty()
                   ? FindExecutable("bwrap", options.path_env)
                   : FindExecutable(options.bwrap_override, options.path_env);
  std::string bwrap_path = bwrap.ok() ? *bwrap : "";
  std::string trial;
  for (const auto& a : TrialSandboxArgv(bwrap_path)) trial += a + ' ';
  std::string key = fmt::format(
      "boot={} ids=uid:{},euid:{},gid:{},egid:{} proc={} label={} ns=user:{},mnt:{},net:{},"
      "pid:{} mounts={:x} sysctl=userns_clone:{},max_user_ns:{},max_net_ns:{},apparmor_userns:{}"
      " bwrap={} override={} path={} require={} trial={}",
      ReadOr("/proc/sys/kernel/random/boot_id", "-"), ::getuid(), ::geteuid(), ::getgid(),
      ::getegid(),
      StatusLines(status,
                  {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"}),
      ReadOr("/proc/self/attr/current", "-"), NamespaceId("user"), NamespaceId("mnt"),
      NamespaceId("net"), NamespaceId("pid"), Fnv1a(MountsWithoutNamespacePins()),
      ReadOr("/proc/sys/kernel/unprivileged_userns_clone", "-"),
      ReadOr("/proc/sys/user/max_user_namespaces", "-"),
      ReadOr("/proc/sys/user/max_net_namespaces", "-"),
      ReadOr("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "-"), BinaryId(bwrap_path),
      options.bwrap_override, options.path_env, options.require_confinement ? 1 : 0, trial);
  return key;
}

std::string EncodeProbeCache(std::string_view key, const ExpensiveProbes& p, int64_t probed_ms) {
  return fmt::format(
      "{}\nkey {}\nprobed_ms {}\nconfines {}\nbwrap_path {}\nconfine_error {}\nnamespace {}\n"
      "namespace_error {}\nend\n",
      kMagic, Escape(key), probed_ms, p.confinement.confines ? 1 : 0,
      Escape(p.confinement.bwrap_path), Escape(p.confinement.error), p.namespace_ok ? 1 : 0,
      Escape(p.namespace_error));
}

std::optional<ExpensiveProbes> DecodeFreshProbeCache(std::string_view text, std::string_view key,
                                                     int64_t now_ms, int64_t max_age_ms) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return std::nullopt;  // torn: every line ends
    lines.push_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
  }
  const std::string_view names[] = {"key",           "probed_ms", "confines",       "bwrap_path",
                                    "confine_error", "namespace", "namespace_error"};
  if (lines.size() != 2 + std::size(names) || lines.front() != kMagic || lines.back() != "end") {
    return std::nullopt;
  }
  std::string values[std::size(names)];
  for (size_t i = 0; i < std::size(names); ++i) {
    std::string_view line = lines[i + 1];
    if (line.substr(0, names[i].size() + 1) != fmt::format("{} ", names[i])) return std::nullopt;
    values[i] = Unescape(line.substr(names[i].size() + 1));
  }
  if (values[0] != key) return std::nullopt;
  char* end = nullptr;
  int64_t probed = std::strtoll(values[1].c_str(), &end, 10);
  if (values[1].empty() || *end != '\0') return std::nullopt;
  if (probed > now_ms || now_ms - probed >= max_age_ms) return std::nullopt;
  auto flag = [](const std::string& v) -> std::optional<bool> {
    if (v == "1") return true;
    if (v == "0") return false;
    return std::nullopt;
  };
  auto confines = flag(values[2]);
  auto ns = flag(values[5]);
  if (!confines || !ns) return std::nullopt;
  ExpensiveProbes p;
  p.confinement.confines = *confines;
  p.confinement.bwrap_path = values[3];
  p.confinement.error = values[4];
  p.namespace_ok = *ns;
  p.namespace_error = values[6];
  // A remembered "confines" always names the bubblewrap that confined.
  if (p.confinement.confines && p.confinement.bwrap_path.empty()) return std::nullopt;
  return p;
}

int64_t ProbeCacheMaxAgeMs() {
  std::string v = GetEnv("CODESPACE_PROBE_CACHE_SECONDS", "600");
  char* end = nullptr;
  long long s = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || s < 0) return 0;
  return static_cast<int64_t>(s) * 1000;
}

HostFacts ProbeHostRemembering(const ProbeOptions& options, const std::string& cache_path,
                               bool* remembered) {
  *remembered = false;
  const int64_t max_age = ProbeCacheMaxAgeMs();
  if (max_age == 0) return ProbeHost(options);
  const std::string key = ProbeCacheKey(options);
  std::optional<ExpensiveProbes> probes;
  if (auto text = ReadFileToString(cache_path); text.ok()) {
    probes = DecodeFreshProbeCache(*text, key, NowMs(), max_age);
  }
  if (probes) {
    *remembered = true;
  } else {
    probes.emplace();
    int64_t at = NowMs();
    probes->confinement = ProbeConfinement(options);
    probes->namespace_ok = ProbeNamespace(&probes->namespace_error);
    // Only what was probed for this very key is remembered (the key is read before probing: a
    // change in between makes the next command probe again, never trust a newer state).
    ReplaceFileForThisBoot(cache_path, EncodeProbeCache(key, *probes, at), 0600).IgnoreError();
  }
  HostFacts f;
  f.uid = ::getuid();
  f.confines = probes->confinement.confines;
  f.bwrap_path = probes->confinement.bwrap_path;
  f.confine_error = probes->confinement.error;
  f.filter.tools = ProbeTools(options.path_env, &f.filter.tools_error);
  f.filter.namespace_ok = probes->namespace_ok;
  f.filter.namespace_error = probes->namespace_error;
  f.filter.forwarding = ProbeForwarding(options.forwarding_path, &f.filter.forwarding_error);
  f.verdict = DecideFilter(f.filter);
  f.require_confinement = options.require_confinement;
  ProbeIdentity(&f);
  f.limits = ProbeLimits(options);  // cheap (a few stat calls): read afresh every time
  f.seccomp_error = SeccompUnavailableReason();  // in-process and ~1 ms: never remembered
  return f;
}

void ForgetProbes(const std::string& cache_path) { ::unlink(cache_path.c_str()); }

}  // namespace codespace
