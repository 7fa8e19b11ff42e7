// The lane harness: runs the real codespace binary as root, as an unprivileged uid, and
// unconfined, and gives the tests the outside things they probe against. Everything it makes
// (staged binaries, workspaces, state dirs, listeners, marker processes) has one owner whose
// destructor removes it, so a failing test leaves nothing behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/process.h"
#include "base/status.h"
#include "base/testing/temp_dir.h"
#include "base/unique_fd.h"

namespace codespace::lanes {

inline constexpr uid_t kUnprivilegedUid = 1654;

// A copy of codespace, codespace-init and escape_probe in a fresh 0755 directory under /tmp, so
// an unprivileged uid can execute them even when the build tree sits under a private home.
// Also a workspace and a state dir owned by `owner`.
class StagedInstall {
 public:
  explicit StagedInstall(uid_t owner);
  // Waits (a while) for the install's supervisors to finish: a filtered run's supervisor tears
  // its network down after the run is recorded, i.e. after `codespace run` has returned. Then
  // nothing of the install may be running (ExpectNothingRunning).
  ~StagedInstall();
  // Fails the test, naming each process and what it waits in, when a process whose command line
  // names this install (its CLI, worker, supervisors, bubblewraps) outlives a short grace; kills
  // them. Pins a leak to the test that made it, not to the suite's last check.
  void ExpectNothingRunning() const;
  // True once no supervisor holds a run directory of this install (waits up to `limit`).
  bool WaitForSupervisors(std::chrono::milliseconds limit = std::chrono::seconds(20)) const;
  // The ids of the runs that have a directory under the state dir (none yet: empty).
  std::set<std::string> RunIds() const;
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  std::string codespace() const { return dir_.path() + "/bin/codespace"; }
  // Inside the workspace: the run's /tmp is private, so a probe under /tmp/... would be hidden.
  std::string probe() const { return workspace() + "/.probe/escape_probe"; }
  std::string seccomp_probe() const { return workspace() + "/.probe/seccomp_probe"; }
  std::string workspace() const { return dir_.path() + "/workspace"; }
  std::string state_dir() const { return dir_.path() + "/state"; }
  const std::string& root() const { return dir_.path(); }
  uid_t owner() const { return owner_; }

 private:
  Status Stage();
  TempDir dir_{"codespace-lane"};
  uid_t owner_;
  bool ok_ = false;
  std::string error_;
};

struct CliResult {
  ExitStatus status;
  std::string output;  // stdout and stderr together
  int code() const { return status.ShellCode(); }
};

// The environment RunCodespace gives codespace: a minimal one plus `extra_env`, and
// CODESPACE_STATE_DIR set to the install's state dir (KEY=VALUE strings).
std::vector<std::string> CodespaceEnvironment(
    const StagedInstall& install, const std::map<std::string, std::string>& extra_env = {});

// Runs `codespace ARGS...` from a StagedInstall: as its owner (through setpriv with no
// capabilities and no_new_privs when the owner is not root), with a minimal environment plus
// `extra_env`, and CODESPACE_STATE_DIR set to the install's state dir.
CliResult RunCodespace(const StagedInstall& install, const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& extra_env = {},
                       const std::vector<std::string>& wrapper = {});

// The same, run as `run_as` (0: no setpriv; the wrapper may change identity itself).
CliResult RunCodespaceAs(const StagedInstall& install, uid_t run_as,
                         const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& extra_env,
                         const std::vector<std::string>& wrapper);

// The latest record in the install's store, as JSON (`codespace show latest --json`).
nlohmann::json LatestRecord(const StagedInstall& install);

// A TCP listener on 127.0.0.1 in the test's own network namespace: the "worker's loopback
// service" a severed run must not reach and a shared run must.
class LoopbackListener {
 public:
  LoopbackListener();
  int port() const { return port_; }
  bool ok() const { return fd_.valid(); }

 private:
  UniqueFd fd_;
  int port_ = 0;
};

// A process outside every sandbox, with a unique marker in its command line; killed and reaped
// when the test ends.
class MarkerProcess {
 public:
  MarkerProcess();
  pid_t pid() const { return child_.pid(); }
  const std::string& marker() const { return marker_; }

 private:
  std::string marker_;
  ChildProcess child_;
};

// Field `index` of /proc/PID/stat, numbered as proc(5) numbers them (3: state, 4: parent,
// 7: controlling terminal); empty when the process is gone.
std::string ProcStatField(pid_t pid, int index);

// Pids of host processes whose command line contains `needle`.
std::vector<pid_t> ProcessesMatching(const std::string& needle);

// SIGKILLs every process whose command line contains `needle`, looking again until a look finds
// none: a bubblewrap killed after the look passed its newest child strands that child (it waits
// forever for bubblewrap's word), and only a later look sees it. How many kills it sent.
int KillProcessesMatching(const std::string& needle);

}  // namespace codespace::lanes
