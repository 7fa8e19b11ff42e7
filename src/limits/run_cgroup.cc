#include "limits/run_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <set>

#include "base/file_util.h"

namespace codespace {

namespace {

bool IsDir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool Exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// /proc/self/cgroup: "ID:CONTROLLERS:PATH" lines. The path of the line naming `controller`
// (v2: the "0::" line when controller is empty).
std::optional<std::string> OwnPath(const std::string& text, const std::string& controller) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string ctrls = line.substr(c1 + 1, c2 - c1 - 1);
    std::string path = line.substr(c2 + 1);
    if (controller.empty()) {
      if (line.substr(0, c1) == "0" && ctrls.empty()) return path;
      continue;
    }
    size_t p = 0;
    while (p <= ctrls.size()) {
      size_t comma = ctrls.find(',', p);
      if (comma == std::string::npos) comma = ctrls.size();
      if (ctrls.substr(p, comma - p) == controller) return path;
      p = comma + 1;
    }
  }
  return std::nullopt;
}

std::string Join(const std::string& dir, const std::string& own) {
  return own == "/" || own.empty() ? dir : dir + own;
}

// Writable for making codespace/<id>: codespace/ itself when it exists (a delegated subtree),
// else the directory it would be made in.
std::string WritableCheck(const std::string& parent) {
  std::string sub = parent + "/codespace";
  const std::string& probe = IsDir(sub) ? sub : parent;
  if (::access(probe.c_str(), W_OK) != 0) {
    return fmt::format(
        "cannot create cgroups in {}: {} (run as root, or delegate that subtree to "
        "uid {})",
        probe, ErrnoText(errno), ::getuid());
  }
  return "";
}

CgroupLayout None(std::string why) {
  CgroupLayout l;
  l.reason = std::move(why);
  return l;
}

CgroupLayout DetectV2(const std::string& mount, const std::string& self) {
  auto own = OwnPath(self, "");
  if (!own) return None(fmt::format("{} is cgroup v2 but this process has no v2 cgroup", mount));
  std::string parent = Join(mount, *own);
  auto controllers = ReadFileToString(parent + "/cgroup.controllers");
  if (!controllers.ok()) return None(controllers.status().message());
  std::string missing;
  for (const std::string& c : CgroupControllers(CgroupHierarchy::kV2)) {
    std::string padded = " " + Trim(*controllers) + " ";
    if (padded.find(" " + c + " ") == std::string::npos)
      missing += (missing.empty() ? "" : ", ") + c;
  }
  if (!missing.empty()) {
    return None(
        fmt::format("the cgroup v2 subtree {} does not offer {} (delegate them: "
                    "Delegate=yes in the systemd unit)",
                    parent, missing));
  }
  if (std::string w = WritableCheck(parent); !w.empty()) return None(w);
  CgroupLayout l;
  l.hierarchy = CgroupHierarchy::kV2;
  l.parents[""] = parent;
  return l;
}

}  // namespace

CgroupLayout DetectCgroupLayout(const std::string& root, const std::string& self_cgroup_path) {
  if (!IsDir(root)) return None(fmt::format("the cgroup root {} does not exist", root));
  auto self = ReadFileToString(self_cgroup_path);
  if (!self.ok()) return None(self.status().message());
  if (Exists(root + "/cgroup.controllers")) return DetectV2(root, *self);
  // v1 (or hybrid): a directory per controller.
  CgroupLayout l;
  std::string missing;
  for (const std::string& c : CgroupControllers(CgroupHierarchy::kV1)) {
    std::string dir = root + "/" + c;
    auto own = OwnPath(*self, c);
    if (!Exists(dir + "/cgroup.procs") || !own) {
      missing += (missing.empty() ? "" : ", ") + c;
      continue;
    }
    l.parents[c] = Join(dir, *own);
  }
  if (missing.empty()) {
    for (const auto& [c, parent] : l.parents) {
      if (std::string w = WritableCheck(parent); !w.empty()) return None(w);
    }
    l.hierarchy = CgroupHierarchy::kV1;
    return l;
  }
  // Hybrid with the controllers on the v2 side.
  if (Exists(root + "/unified/cgroup.controllers")) {
    CgroupLayout v2 = DetectV2(root + "/unified", *self);
    if (v2.hierarchy == CgroupHierarchy::kV2) return v2;
  }
  return None(
      fmt::format("no cgroup controller {} under {} (v1), and no cgroup v2 with memory, "
                  "pids and cpu",
                  missing, root));
}

std::string RunCgroupDir(const std::string& parent, const std::string& run_id) {
  return parent + "/codespace/" + run_id;
}

namespace {

// O_CREAT: see procs_ (a test's directory tree has no files until written; cgroupfs refuses to
// create one, so a file the kernel lacks still fails the write).
Status WriteCgroupFile(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(fmt::format("open({}, O_WRONLY)", path), errno);
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return ErrnoError(fmt::format("write({}, \"{}\")", path, value), n < 0 ? err : EIO);
  }
  return OkStatus();
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return OkStatus();
  return ErrnoError(fmt::format("mkdir({})", path), errno);
}

std::vector<pid_t> ProcsOf(const std::string& dir) {
  std::vector<pid_t> pids;
  auto text = ReadFileToString(dir + "/cgroup.procs");
  if (!text.ok()) return pids;
  const char* p = text->c_str();
  char* end = nullptr;
  for (long v = std::strtol(p, &end, 10); end != p; v = std::strtol(p, &end, 10)) {
    pids.push_back(static_cast<pid_t>(v));
    p = end;
  }
  return pids;
}

}  // namespace

Status KillAndRemoveCgroupDir(const std::string& dir) {
  if (!IsDir(dir)) return OkStatus();
  // v2 kills the whole cgroup at once, forks in flight included.
  if (Exists(dir + "/cgroup.kill")) WriteCgroupFile(dir + "/cgroup.kill", "1").IgnoreError();
  // v1 (and a v2 without cgroup.kill): list and kill until nothing is left. A process forked
  // meanwhile is in the cgroup too (children inherit it) and the next look sees it.
  for (int round = 0; round < 5000; ++round) {
    std::vector<pid_t> left = ProcsOf(dir);
    if (left.empty() && ::rmdir(dir.c_str()) == 0) return OkStatus();
    if (left.empty() && errno != EBUSY) return ErrnoError(fmt::format("rmdir({})", dir), errno);
    for (pid_t p : left) ::kill(p, SIGKILL);
    ::usleep(1000);  // a killed process leaves the cgroup once it has exited
  }
  return FailedPreconditionError(
      fmt::format("rmdir({}): processes still in it after 5 s of SIGKILL", dir));
}

Result<std::unique_ptr<RunCgroup>> RunCgroup::Create(const CgroupLayout& layout,
                                                     const std::string& run_id,
                                                     const RunLimits& limits) {
  if (layout.hierarchy == CgroupHierarchy::kNone) {
    return FailedPreconditionError("no cgroup hierarchy: " + layout.reason);
  }
  std::unique_ptr<RunCgroup> cg(new RunCgroup(layout));
  std::set<std::string> seen;  // "cpu,cpuacct" mounted together: one directory for both
  for (const auto& [controller, parent] : layout.parents) {
    char resolved[4096];
    std::string key = ::realpath(parent.c_str(), resolved) ? resolved : parent;
    std::string dir = RunCgroupDir(parent, run_id);
    cg->by_controller_[controller] = dir;
    if (!seen.insert(key).second) continue;
    if (layout.hierarchy == CgroupHierarchy::kV2) {
      // The controllers must be on in every parent's subtree_control for the run's own files.
      RETURN_IF_ERROR(
          WriteCgroupFile(parent + "/cgroup.subtree_control", "+memory +pids +cpu")
              .WithContext("enable the controllers for codespace/ (the worker's cgroup must have "
                           "no processes of its own on v2: run it in a leaf)"));
    }
    // codespace/ may be removed between the two mkdirs by whoever tidies an empty one (a test's
    // teardown): then it is made again.
    int made = -1;
    for (int attempt = 0; attempt < 3 && made != 0; ++attempt) {
      RETURN_IF_ERROR(MakeDir(parent + "/codespace"));
      if (layout.hierarchy == CgroupHierarchy::kV2) {
        RETURN_IF_ERROR(
            WriteCgroupFile(parent + "/codespace/cgroup.subtree_control", "+memory +pids +cpu"));
      }
      made = ::mkdir(dir.c_str(), 0755);
      if (made != 0 && errno != ENOENT) break;
    }
    if (made != 0) return ErrnoError(fmt::format("mkdir({})", dir), errno);
    cg->dirs_.push_back(dir);
  }
  for (const CgroupWrite& w : PlanCgroupWrites(limits, layout.hierarchy)) {
    const std::string& dir = cg->by_controller_[w.controller];
    std::string path = dir + "/" + w.file;
    if (!w.required && !Exists(path)) continue;
    RETURN_IF_ERROR(WriteCgroupFile(path, w.value));
  }
  for (const std::string& dir : cg->dirs_) {
    // O_CREAT only matters to a directory tree standing in for cgroupfs (tests); cgroupfs has
    // the file, and makes none.
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFile((dir + "/cgroup.procs").c_str(),
                                           O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    cg->procs_.push_back(std::move(fd));
  }
  return cg;
}

Result<std::unique_ptr<RunCgroup>> MakeRunCgroup(const std::string& cgroup_root,
                                                 const std::string& run_id,
                                                 const RunLimits& limits) {
  CgroupLayout layout = DetectCgroupLayout(cgroup_root);
  if (layout.hierarchy == CgroupHierarchy::kNone) {
    if (!limits.needs_cgroup()) return std::unique_ptr<RunCgroup>();
    return FailedPreconditionError(
        fmt::format("the run asks for {} but this host has no cgroup "
                    "for it: {}",
                    DescribeLimits(limits), layout.reason));
  }
  return RunCgroup::Create(layout, run_id, limits);
}

namespace {
// A root worker's codespace/ goes once its last run cgroup has: nothing of codespace's stays in
// the hierarchy between runs. A delegated one (owned by the delegate uid, made by an operator or
// systemd) stays: its owner could not make it again. A run starting meanwhile makes it again
// (Create retries), and rmdir refuses one that still holds a run's cgroup.
void RemoveEmptyRootOwnedParent(const std::string& codespace_dir) {
  struct stat st {};
  if (::geteuid() != 0 || ::stat(codespace_dir.c_str(), &st) != 0 || st.st_uid != 0) return;
  ::rmdir(codespace_dir.c_str());
}
}  // namespace

Status RemoveRunCgroupByName(const std::string& cgroup_root, const std::string& run_id) {
  CgroupLayout layout = DetectCgroupLayout(cgroup_root);
  Status first;
  for (const auto& [controller, parent] : layout.parents) {
    Status s = KillAndRemoveCgroupDir(RunCgroupDir(parent, run_id));
    if (!s.ok() && first.ok()) first = s;
    if (s.ok()) RemoveEmptyRootOwnedParent(parent + "/codespace");
  }
  return first;
}

RunCgroup::~RunCgroup() { KillAndRemove().IgnoreError(); }

std::vector<int> RunCgroup::procs_fds() const {
  std::vector<int> fds;
  for (const auto& fd : procs_) fds.push_back(fd.get());
  return fds;
}

RunUsage RunCgroup::ReadUsage() const {
  std::map<std::string, std::string> texts;
  for (const auto& [controller, file] : UsageFiles(layout_.hierarchy)) {
    auto it = by_controller_.find(controller);
    if (it == by_controller_.end()) continue;
    auto text = ReadFileToString(it->second + "/" + file);
    if (text.ok()) texts[controller.empty() ? file : controller + "/" + file] = *text;
  }
  return ParseUsage(layout_.hierarchy, texts, ::sysconf(_SC_CLK_TCK));
}

Status RunCgroup::KillAndRemove() {
  if (removed_) return OkStatus();
  procs_.clear();
  Status first;
  for (const std::string& dir : dirs_) {
    Status s = KillAndRemoveCgroupDir(dir);
    if (!s.ok() && first.ok()) first = s;
    if (s.ok()) RemoveEmptyRootOwnedParent(dir.substr(0, dir.rfind('/')));
  }
  removed_ = first.ok();
  return first;
}

std::vector<std::string> SweepRunCgroups(const CgroupLayout& layout,
                                         const std::function<bool(const std::string&)>& finished,
                                         std::vector<std::string>* errors) {
  std::vector<std::string> removed;
  std::set<std::string> seen;
  for (const auto& [controller, parent] : layout.parents) {
    std::string sub = parent + "/codespace";
    char resolved[4096];
    if (!seen.insert(::realpath(sub.c_str(), resolved) ? resolved : sub).second) continue;
    DIR* d = ::opendir(sub.c_str());
    if (!d) continue;
    std::vector<std::string> ids;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == ".." || !IsDir(sub + "/" + name)) continue;
      ids.push_back(name);
    }
    ::closedir(d);
    for (const std::string& id : ids) {
      if (!finished(id)) continue;
      Status s = KillAndRemoveCgroupDir(sub + "/" + id);
      if (s.ok()) {
        removed.push_back(sub + "/" + id);
      } else if (errors) {
        errors->push_back(s.message());
      }
    }
  }
  return removed;
}

}  // namespace codespace
