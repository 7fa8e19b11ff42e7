#include "cli/record_format.h"

#include <fmt/format.h>

#include <ctime>

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

}  // namespace

std::string FormatRecord(const RunRecord& r) {
  std::string out;
  auto line = [&](std::string_view k, const std::string& v) {
    out += fmt::format("{:<10} {}\n", std::string(k) + ":", v);
  };
  line("id", r.id);
  line("command", Command(r.spec));
  line("workspace", r.spec.workspace);
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
  line("finished", Time(r.ended_ms));
  return out;
}

std::string FormatRecordTable(const std::vector<RunRecord>& records) {
  std::string out = fmt::format("{:<16}  {:<9}  {:<8}  {:<8}  {:<10}  {:<24}  {}\n", "ID", "STATE",
                                "PLAN", "NETWORK", "ENDED", "CREATED", "COMMAND");
  for (const auto& r : records) {
    std::string cmd = Command(r.spec);
    if (cmd.size() > 60) cmd = cmd.substr(0, 57) + "...";
    out += fmt::format("{:<16}  {:<9}  {:<8}  {:<8}  {:<10}  {:<24}  {}\n", r.id,
                       RunStateName(r.state), PlanName(r.plan), NetworkPostureName(r.network),
                       Ending(r), Time(r.created_ms), cmd);
  }
  return out;
}

}  // namespace codespace
