#include "harness/netns_util.h"

#include "net/netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <thread>

#include "base/file_util.h"
#include "base/process.h"
#include "base/unique_fd.h"

namespace codespace::lanes {
namespace {

constexpr char kNetnsDir[] = "/run/netns";

std::vector<std::string> ListDir(const char* dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir);
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  return names;
}

// (device, inode) of a namespace file: equal pairs are the same namespace.
std::optional<std::pair<dev_t, ino_t>> NsId(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(st.st_dev, st.st_ino);
}

// Processes left inside a namespace would keep it (and its veths) alive after its name is gone.
Status KillProcessesInNetns(const std::string& name) {
  auto target = NsId(NamedNetnsPath(name));
  if (!target) return OkStatus();
  const pid_t self = ::getpid();
  for (const std::string& entry : ListDir("/proc")) {
    pid_t pid = 0;
    auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), pid);
    if (ec != std::errc() || end != entry.data() + entry.size() || pid == self) continue;
    const std::string ns = fmt::format("/proc/{}/ns/net", pid);
    if (NsId(ns) != target) continue;
    // Open a pidfd first and check again: the signal can then only reach this very process,
    // never a pid reused in between.
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!pidfd.valid() || NsId(ns) != target) continue;
    if (::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0) != 0 && errno != ESRCH) {
      return ErrnoError(fmt::format("pidfd_send_signal({}, SIGKILL) in netns {}", pid, name),
                        errno);
    }
  }
  return OkStatus();
}

}  // namespace

std::string NamedNetnsPath(std::string_view name) { return fmt::format("{}/{}", kNetnsDir, name); }

bool NamedNetnsExists(std::string_view name) {
  struct stat st {};
  return ::lstat(NamedNetnsPath(name).c_str(), &st) == 0;
}

std::vector<std::string> ListNamedNetns() { return ListDir(kNetnsDir); }

Status RunIp(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto out = RunCommand(argv);
  if (!out.ok()) return out.status().WithContext(fmt::format("{}", fmt::join(argv, " ")));
  if (!out->status.success()) {
    std::string text = out->output;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return InternalError(
        fmt::format("{}: {}: {}", fmt::join(argv, " "), out->status.ToString(), text));
  }
  return OkStatus();
}

Status AddNamedNetns(const std::string& name) { return RunIp({"netns", "add", name}); }

Status DeleteNamedNetns(const std::string& name) {
  if (!NamedNetnsExists(name)) return OkStatus();
  RETURN_IF_ERROR(KillProcessesInNetns(name));
  // As codespace's own removals do: never while a sandbox is binding the root (see
  // NetnsMountLock), or its remount of this vanishing mount fails and the run is aborted.
  ASSIGN_OR_RETURN(NetnsMountLock lock, NetnsMountLock::Exclusive());
  Status s = RunIp({"netns", "del", name});
  // Two harness processes may sweep the same stale namespace at once: gone is gone.
  if (!s.ok() && !NamedNetnsExists(name)) return OkStatus();
  return s;
}

Status CallInNetns(const std::string& ns_path, const std::function<Status()>& fn) {
  Status result;
  std::thread t([&] {
    auto fd = OpenFile(ns_path.c_str(), O_RDONLY);
    if (!fd.ok()) {
      result = fd.status();
      return;
    }
    if (::setns(fd->get(), CLONE_NEWNET) != 0) {
      result = ErrnoError(fmt::format("setns({}, CLONE_NEWNET)", ns_path), errno);
      return;
    }
    result = fn();
  });
  t.join();
  return result;
}

std::optional<pid_t> HarnessNamePid(std::string_view name) {
  constexpr std::string_view prefix = kHarnessPrefix;
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  pid_t pid = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
  if (ec != std::errc() || end == name.data() || pid <= 0) return std::nullopt;
  if (end != name.data() + name.size() && *end != '-') return std::nullopt;
  return pid;
}

bool PidAlive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

Result<std::vector<std::string>> RemoveStaleHarnessNamespaces() {
  std::vector<std::string> removed;
  auto ends_with = [](std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
  };
  for (const std::string& name : ListNamedNetns()) {
    auto pid = HarnessNamePid(name);
    if (!pid || !(ends_with(name, "-w") || ends_with(name, "-i")) || PidAlive(*pid)) continue;
    RETURN_IF_ERROR(DeleteNamedNetns(name).WithContext("removing stale harness namespace"));
    removed.push_back(name);
  }
  for (const std::string& name : ListDir("/tmp")) {
    auto pid = HarnessNamePid(name);
    if (!pid || name.find("-etc.") == std::string::npos || PidAlive(*pid)) continue;
    const std::string dir = "/tmp/" + name;
    Status s = RemoveTree(dir);
    struct stat st {};
    if (!s.ok() && ::lstat(dir.c_str(), &st) == 0) return s;  // else a concurrent sweep won
  }
  return removed;
}

}  // namespace codespace::lanes
