#include "supervisor/run_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>

#include <cerrno>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/file_util.h"
#include "store/record_json.h"

namespace codespace {

RunDir RunDirFor(const std::string& state_dir, const std::string& run_id) {
  return RunDir{fmt::format("{}/runs/{}", state_dir, run_id)};
}

// A POSIX record lock (F_SETLK), not flock(): it belongs to the process, so a child the
// supervisor forks (bubblewrap, between fork and exec) never holds it, and a supervisor's death
// frees it at once. A flock() is shared by every copy of the descriptor: a supervisor killed
// while its child had not yet exec'd left the lock held and its run looking alive. The price of
// record locks, that closing any descriptor of the file drops them, is moot: only this opens it
// in a supervisor.
Result<UniqueFd> TakeSupervisorLock(const RunDir& dir) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(dir.lock_path().c_str(), O_RDWR | O_CREAT, 0640));
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;
  while (::fcntl(fd.get(), F_SETLK, &whole) != 0) {
    if (errno == EINTR) continue;
    if (errno == EACCES || errno == EAGAIN) {
      return Status(StatusCode::kAlreadyExists,
                    fmt::format("{}: held by another supervisor", dir.lock_path()));
    }
    return ErrnoError(fmt::format("fcntl({}, F_SETLK)", dir.lock_path()), errno);
  }
  return fd;
}

bool SupervisorLockHeld(const RunDir& dir) {
  auto fd = OpenFile(dir.lock_path().c_str(), O_RDONLY);
  if (!fd.ok()) return false;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  if (::fcntl(fd->get(), F_GETLK, &probe) != 0) return false;
  return probe.l_type != F_UNLCK;
}

Result<ProcessIdentity> IdentityOf(pid_t pid) {
  ASSIGN_OR_RETURN(std::string stat, ReadFileToString(fmt::format("/proc/{}/stat", pid)));
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return InternalError(fmt::format("/proc/{}/stat: unreadable", pid));
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  // Fields after the command: state(3) ... starttime(22).
  for (int i = 3; i < 22 && rest >> field; ++i) {
  }
  uint64_t start = 0;
  if (!(rest >> start)) return InternalError(fmt::format("/proc/{}/stat: no start time", pid));
  return ProcessIdentity{pid, start};
}

bool IsAlive(const ProcessIdentity& id) {
  if (id.pid <= 0) return false;
  auto now = IdentityOf(id.pid);
  if (!now.ok() || now->start_time != id.start_time) return false;
  // A zombie is not alive: it only waits to be reaped.
  auto stat = ReadFileToString(fmt::format("/proc/{}/stat", id.pid));
  if (!stat.ok()) return false;
  size_t close = stat->rfind(')');
  return close == std::string::npos || close + 2 >= stat->size() || (*stat)[close + 2] != 'Z';
}

Status WriteIdentity(const std::string& path, const ProcessIdentity& id) {
  // No fsync: an identity names a process of this boot (pid + start time), so after a crash of
  // the machine it would name nothing either way; readers only need it never torn.
  return ReplaceFileForThisBoot(path, fmt::format("{} {}\n", id.pid, id.start_time), 0644);
}

Result<ProcessIdentity> ReadIdentity(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::istringstream in(text);
  ProcessIdentity id;
  if (!(in >> id.pid >> id.start_time)) return InternalError(fmt::format("{}: malformed", path));
  return id;
}

namespace {
using Json = nlohmann::json;

std::string KindName(RunOutcome::Kind k) {
  switch (k) {
    case RunOutcome::Kind::kExited: return "exited";
    case RunOutcome::Kind::kSignaled: return "signaled";
    case RunOutcome::Kind::kTimedOut: return "timed-out";
    case RunOutcome::Kind::kCancelled: return "cancelled";
    case RunOutcome::Kind::kNotFound: return "not-found";
    case RunOutcome::Kind::kCannotInvoke: return "cannot-invoke";
    case RunOutcome::Kind::kAborted: return "aborted";
  }
  return "aborted";
}

Result<RunOutcome::Kind> ParseKind(const std::string& s) {
  for (auto k : {RunOutcome::Kind::kExited, RunOutcome::Kind::kSignaled, RunOutcome::Kind::kTimedOut,
                 RunOutcome::Kind::kCancelled, RunOutcome::Kind::kNotFound,
                 RunOutcome::Kind::kCannotInvoke, RunOutcome::Kind::kAborted}) {
    if (KindName(k) == s) return k;
  }
  return InvalidArgumentError(fmt::format("unknown outcome \"{}\"", s));
}
}  // namespace

Status WriteRunStatus(const RunDir& dir, const RunStatus& st) {
  Json j = Json::object();
  j["kind"] = KindName(st.outcome.kind);
  j["exit_code"] = st.outcome.exit_code;
  j["signal"] = st.outcome.signal;
  j["reason"] = st.outcome.reason;
  j["output_error"] = st.outcome.output_error;
  j["network_report"] = Json::parse(NetworkReportToJson(st.outcome.network_report), nullptr, false);
  j["logs"] = Json::parse(LogsToJson(st.stdout_log, st.stderr_log), nullptr, false);
  j["supervisor_peak_rss_kb"] = st.supervisor_peak_rss_kb;
  if (st.setup_ms) j["setup_ms"] = *st.setup_ms;
  if (st.host_uid) j["host_uid"] = *st.host_uid;
  if (st.host_gid) j["host_gid"] = *st.host_gid;
  j["ended_ms"] = st.ended_ms;
  if (!st.usage.empty()) j["usage"] = Json::parse(RunUsageToJson(st.usage), nullptr, false);
  return WriteFileAtomically(dir.status_path(),
                             j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n", 0644);
}

Result<RunStatus> ReadRunStatus(const RunDir& dir) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(dir.status_path()));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InternalError(fmt::format("{}: not a status document", dir.status_path()));
  }
  RunStatus st;
  try {
    ASSIGN_OR_RETURN(st.outcome.kind, ParseKind(j.at("kind").get<std::string>()));
    st.outcome.exit_code = j.at("exit_code").get<int>();
    st.outcome.signal = j.at("signal").get<int>();
    st.outcome.reason = j.at("reason").get<std::string>();
    st.outcome.output_error = j.at("output_error").get<std::string>();
    ASSIGN_OR_RETURN(st.outcome.network_report, NetworkReportFromJson(j.at("network_report").dump()));
    ASSIGN_OR_RETURN(auto logs, LogsFromJson(j.at("logs").dump()));
    st.stdout_log = logs.first;
    st.stderr_log = logs.second;
    st.supervisor_peak_rss_kb = j.at("supervisor_peak_rss_kb").get<uint64_t>();
    // Absent: the command never started (or a supervisor from before setup was measured).
    if (j.contains("setup_ms")) st.setup_ms = j.at("setup_ms").get<int64_t>();
    if (j.contains("host_uid")) st.host_uid = j.at("host_uid").get<uint32_t>();
    if (j.contains("host_gid")) st.host_gid = j.at("host_gid").get<uint32_t>();
    st.ended_ms = j.at("ended_ms").get<int64_t>();
    if (j.contains("usage")) {
      ASSIGN_OR_RETURN(st.usage, RunUsageFromJson(j.at("usage").dump()));
    }
  } catch (const std::exception& e) {
    return InternalError(fmt::format("{}: {}", dir.status_path(), e.what()));
  }
  return st;
}

}  // namespace codespace
