#include "cli/record_format.h"

#include <fmt/format.h>

#include <ctime>

#include "cli/cli_rules.h"

namespace codespace {

namespace {

std::string Time(int64_t ms) {
  if (ms == 0) return "-";
  time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms % 1000));
}

std::string Command(const RunSpec& spec) {
  std::string out;
  for (const auto& a : spec.argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`") == std::string::npos;
    out += plain ? a : "'" + a + "'";
  }
  return out;
}

std::string Ending(const RunRecord& r) {
  if (r.signal) return fmt::format("signal {}", *r.signal);
  if (r.exit_code) return fmt::format("exit {}", *r.exit_code);
  return "-";
}

std::string Egress(const RunSpec& spec) {
  std::string out(EgressPolicyName(spec.egress.mode));
  for (size_t i = 0; i < spec.egress.allowlist.size(); ++i) {
    out += (i == 0 ? " " : ",") + spec.egress.allowlist[i].ToString();
  }
  return out;
}

// "default", or "host", then each bind and hide: "default; ro-bind /a; bind /b:/c; hide /d".
std::string View(const FsView& v) {
  std::string out(FsViewKindName(v.kind));
  for (const FsBind& b : v.binds) {
    out += fmt::format("; {} {}", b.read_only ? "ro-bind" : "bind", b.source);
    if (b.destination != b.source) out += ":" + b.destination;
  }
  for (const std::string& h : v.hides) out += "; hide " + h;
  return out;
}

}  // namespace

std::string FormatRecord(const RunRecord& r) {
  std::string out;
  auto line = [&](std::string_view k, const std::string& v) {
    out += fmt::format("{:<10} {}\n", std::string(k) + ":", v);
  };
  line("id", r.id);
  line("command", Command(r.spec));
  line("workspace", r.spec.workspace);
  line("view", View(r.spec.fs));
  line("egress", Egress(r.spec));
  line("plan", std::string(PlanName(r.plan)));
  line("network", std::string(NetworkPostureName(r.network)) +
                      (r.network == NetworkPosture::kSevered ? " (NetworkSevered)" : ""));
  if (!r.namespace_name.empty()) line("namespace", r.namespace_name);
  line("state", std::string(RunStateName(r.state)));
  line("ended", Ending(r));
  if (!r.reason.empty()) line("reason", r.reason);
  if (!r.spec.broker.empty()) {
    const NetworkReport& n = r.network_report;
    line("broker", fmt::format("{}: {} connections ({} failed), {} bytes to it, {} bytes from it",
                               r.spec.broker.address, n.broker_connections, n.broker_failed,
                               n.broker_bytes_to, n.broker_bytes_from));
  }
  if (r.plan == Plan::kFiltered) {
    const NetworkReport& n = r.network_report;
    auto list = [](const std::vector<std::string>& v) {
      std::string joined;
      for (const auto& e : v) joined += (joined.empty() ? "" : ", ") + e;
      return joined.empty() ? std::string("-") : joined;
    };
    line("dns ok", list(n.dns_admitted));
    line("dns no", list(n.dns_refused));
    line("dropped", fmt::format("{} packets", n.dropped_packets));
  }
  // Limits and usage (issue 15).
  line("limits", DescribeLimits(r.spec.limits));
  if (!r.usage.empty()) {
    const RunUsage& u = r.usage;
    std::string used;
    auto add = [&](std::string part) { used += (used.empty() ? "" : ", ") + part; };
    if (u.peak_memory_bytes) add("peak memory " + FormatBytes(*u.peak_memory_bytes));
    if (u.cpu_user_usec || u.cpu_system_usec) {
      add(fmt::format("cpu {:.2f} s user + {:.2f} s system",
                      static_cast<double>(u.cpu_user_usec.value_or(0)) / 1e6,
                      static_cast<double>(u.cpu_system_usec.value_or(0)) / 1e6));
    }
    if (u.peak_pids) add(fmt::format("peak {} processes", *u.peak_pids));
    if (u.oom_kills) add(fmt::format("{} OOM kill(s)", *u.oom_kills));
    if (!u.limit_kill.empty()) add("ended by its " + u.limit_kill + " limit");
    line("usage", used.empty() ? "-" : used);
  }
  for (const auto& [name, d] : {std::pair<const char*, const LogDigest&>{"stdout", r.stdout_log},
                                std::pair<const char*, const LogDigest&>{"stderr", r.stderr_log}}) {
    if (d.sealed) line(name, fmt::format("{} bytes, sha256 {}", d.bytes, d.sha256));
  }
  if (!r.seccomp.empty()) {
    line("seccomp", r.spec.allow_ptrace ? r.seccomp + " (allow_ptrace)" : r.seccomp);
  }
  line("created", Time(r.created_ms));
  line("started", Time(r.started_ms));
  if (r.setup_ms)
    line("setup", fmt::format("{} ms (sandbox and network, until the command ran)", *r.setup_ms));
  if (r.host_uid) {
    line("host uid",
         fmt::format("{} gid {} (leased for this run)", *r.host_uid, r.host_gid.value_or(-1)));
  }
  line("finished", Time(r.ended_ms));
  return out;
}

std::string FormatRecordTable(const std::vector<RunRecord>& records) {
  std::string out = fmt::format("{:<16}  {:<9}  {:<8}  {:<8}  {:<10}  {:<24}  {}\n", "ID", "STATE",
                                "PLAN", "NETWORK", "ENDED", "CREATED", "COMMAND");
  for (const auto& r : records) {
    std::string cmd = OneLine(Command(r.spec));  // one line per run, whatever the command
    if (cmd.size() > 60) cmd = cmd.substr(0, 57) + "...";
    out += fmt::format("{:<16}  {:<9}  {:<8}  {:<8}  {:<10}  {:<24}  {}\n", r.id,
                       RunStateName(r.state), PlanName(r.plan), NetworkPostureName(r.network),
                       Ending(r), Time(r.created_ms), cmd);
  }
  return out;
}

}  // namespace codespace
