#include "harness/lane_env.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "base/file_util.h"
#include "supervisor/run_dir.h"

#ifndef CODESPACE_BUILD_DIR
#error "CODESPACE_BUILD_DIR must name the build directory"
#endif

namespace codespace::lanes {

namespace {

Status CopyExecutable(const std::string& from, const std::string& to) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(from));
  return WriteFileAtomically(to, bytes, 0755);
}

Status Chown(const std::string& path, uid_t uid) {
  if (::chown(path.c_str(), uid, uid) != 0)
    return ErrnoError(fmt::format("chown({})", path), errno);
  return OkStatus();
}

}  // namespace

StagedInstall::StagedInstall(uid_t owner) : owner_(owner) {
  Status s = Stage();
  ok_ = s.ok();
  error_ = s.message();
}

StagedInstall::~StagedInstall() {
  WaitForSupervisors();
  ExpectNothingRunning();
}

void StagedInstall::ExpectNothingRunning() const {
  if (root().empty()) return;
  // A process on its way out (a sandbox's last processes as its pid namespace ends) is given a
  // moment; a zombie's command line is empty, so it is not seen.
  for (int i = 0; i < 150 && !ProcessesMatching(root()).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string left;
  for (pid_t p : ProcessesMatching(root())) {
    if (p == ::getpid()) continue;
    std::string env = ReadFileToString(fmt::format("/proc/{}/environ", p)).value_or("");
    std::string run;
    for (size_t at = 0; at < env.size();) {
      size_t end = env.find('\0', at);
      if (end == std::string::npos) end = env.size();
      if (env.compare(at, 23, "CODESPACE_BWRAP_OF_RUN=") == 0) run = env.substr(at, end - at);
      at = end + 1;
    }
    std::string cmd = ReadFileToString(fmt::format("/proc/{}/cmdline", p)).value_or("");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    left += fmt::format("\n  pid {} (state {}, parent {}, waiting in {}) {}\n    {}", p,
                        ProcStatField(p, 3), ProcStatField(p, 4),
                        ReadFileToString(fmt::format("/proc/{}/wchan", p)).value_or("?"), run,
                        cmd.substr(0, 400));
  }
  if (left.empty()) return;
  KillProcessesMatching(root());
  ADD_FAILURE() << "left running by the test (now killed):" << left;
}

std::set<std::string> StagedInstall::RunIds() const {
  std::set<std::string> ids;
  if (DIR* d = ::opendir((state_dir() + "/runs").c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') ids.insert(e->d_name);
    }
    ::closedir(d);
  }
  return ids;
}

bool StagedInstall::WaitForSupervisors(std::chrono::milliseconds limit) const {
  auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool held = false;
    for (const std::string& id : RunIds()) {
      if (SupervisorLockHeld(RunDirFor(state_dir(), id))) held = true;
    }
    if (!held) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status StagedInstall::Stage() {
  if (dir_.path().empty()) return InternalError("mkdtemp failed");
  if (::chmod(dir_.path().c_str(), 0755) != 0) return ErrnoError("chmod", errno);
  const std::string build = CODESPACE_BUILD_DIR;
  for (const char* d : {"/bin", "/workspace", "/state"}) {
    RETURN_IF_ERROR(MakeDirs(dir_.path() + d, 0755));
  }
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {build + "/codespace", "codespace"},
           {build + "/codespace-init", "codespace-init"},
       }) {
    RETURN_IF_ERROR(CopyExecutable(from, dir_.path() + "/bin/" + to));
  }
  RETURN_IF_ERROR(MakeDirs(workspace() + "/.probe", 0755));
  RETURN_IF_ERROR(CopyExecutable(build + "/tests/escape_probe", probe()));
  RETURN_IF_ERROR(CopyExecutable(build + "/tests/seccomp_probe", seccomp_probe()));
  for (const std::string& d : {workspace(), state_dir()}) RETURN_IF_ERROR(Chown(d, owner_));
  return OkStatus();
}

std::vector<std::string> CodespaceEnvironment(const StagedInstall& install,
                                              const std::map<std::string, std::string>& extra_env) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", install.root()},
      {"CODESPACE_STATE_DIR", install.state_dir()},
  };
  for (const auto& [k, v] : extra_env) env[k] = v;
  std::vector<std::string> envv;
  for (const auto& [k, v] : env) envv.push_back(k + "=" + v);
  return envv;
}

CliResult RunCodespace(const StagedInstall& install, const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& extra_env,
                       const std::vector<std::string>& wrapper) {
  return RunCodespaceAs(install, install.owner(), args, extra_env, wrapper);
}

CliResult RunCodespaceAs(const StagedInstall& install, uid_t run_as,
                         const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& extra_env,
                         const std::vector<std::string>& wrapper) {
  std::vector<std::string> argv = wrapper;
  if (run_as != 0) {
    std::string id = std::to_string(run_as);
    for (const std::string& a :
         {std::string("/usr/bin/setpriv"), "--reuid=" + id, "--regid=" + id,
          std::string("--clear-groups"), std::string("--inh-caps=-all"),
          std::string("--bounding-set=-all"), std::string("--no-new-privs"), std::string("--")}) {
      argv.push_back(a);
    }
  }
  argv.push_back(install.codespace());
  for (const auto& a : args) argv.push_back(a);
  auto out = RunCommand(argv, CodespaceEnvironment(install, extra_env));
  if (!out.ok()) return {ExitStatus::Exited(255), "RunCommand failed: " + out.status().message()};
  return {out->status, out->output};
}

nlohmann::json LatestRecord(const StagedInstall& install) {
  CliResult r = RunCodespace(install, {"show", "latest", "--json"});
  if (r.code() != 0) return nlohmann::json{{"error", r.output}};
  auto j = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return nlohmann::json{{"error", "not JSON: " + r.output}};
  return j;
}

LoopbackListener::LoopbackListener() {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return;
  UniqueFd fd(s);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(s, 64) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return;
  }
  port_ = ntohs(a.sin_port);
  fd_ = std::move(fd);
}

MarkerProcess::MarkerProcess() {
  std::random_device rd;
  // sleep accepts a fractional count of seconds: a unique number is a unique marker.
  marker_ = fmt::format("3600.{:09d}", rd() % 1000000000u);
  SpawnOptions o;
  o.argv = {"/bin/sleep", marker_};
  auto child = Spawn(o);
  if (child.ok()) child_ = std::move(*child);
}

std::string ProcStatField(pid_t pid, int index) {
  auto stat = ReadFileToString(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok()) return "";
  size_t close = stat->rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(stat->substr(close + 2));
  std::string field;
  for (int i = 3; i <= index; ++i) {
    if (!(rest >> field)) return "";
  }
  return field;
}

std::vector<pid_t> ProcessesMatching(const std::string& needle) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string cmd = ss.str();
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(needle) != std::string::npos) out.push_back(std::atoi(e->d_name));
  }
  ::closedir(d);
  return out;
}

int KillProcessesMatching(const std::string& needle) {
  int killed = 0;
  if (needle.empty()) return 0;  // it would match every process on the machine
  // A killed process is still seen until it has exited (a zombie's command line is empty).
  for (int look = 0; look < 2500; ++look) {
    std::vector<pid_t> found = ProcessesMatching(needle);
    std::erase(found, ::getpid());
    if (found.empty()) break;
    for (pid_t p : found) killed += ::kill(p, SIGKILL) == 0 ? 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return killed;
}

}  // namespace codespace::lanes
