// JSON for run specs and run records: how they are stored (the SQLite store keeps the spec as
// JSON), shown (`codespace show --json`) and handed between processes.
//
// The public API is free of nlohmann::json, and nothing here throws: the library's exceptions are
// caught inside and become Status errors.
//
// RunSpec:
//   {"argv": ["claude", "-p", "..."], "env": ["HOME=/home/run"], "workspace": "/srv/ws/1",
//    "egress": {"mode": "allowlist", "allowlist": ["api.anthropic.com", "203.0.113.0/24"]},
//    "timeout_seconds": 600}
// The egress mode is EgressPolicyName's text; allowlist entries are AllowlistEntry::ToString's
// canonical text, and are parsed back (and validated) with MakeEgressPolicy.
//
// RunRecord:
//   {"id": "...", "spec": {RunSpec}, "plan": "filtered", "network": "filtered",
//    "namespace": "cs-...", "state": "exited", "exit_code": 0, "signal": null, "reason": "",
//    "created_ms": 1700000000000, "started_ms": ..., "ended_ms": ..., "setup_ms": 38,
//    "network_report": {NetworkReport}, "logs": {see LogsToJson}}
// plan/network/state are PlanName/NetworkPostureName/RunStateName; exit_code, signal and
// setup_ms are null when unset.
//
// Parsing is strict: every field of a record must be present, with its type, except "setup_ms"
// (missing reads as null: records from a codespace before it); a spec may omit "env" (empty) and
// "timeout_seconds" (0) and an egress policy may omit "allowlist" (empty).
// Unknown fields are errors, so that a misspelt field in a hand-written spec ("timeuot") is
// reported rather than silently ignored. Errors name the field, e.g.
//   run spec JSON: "egress.allowlist[1]": allowlist entry "exa mple.com": invalid host name
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "run/run_spec.h"
#include "store/run_record.h"

namespace codespace {

// Compact JSON. Strings that are not valid UTF-8 (argv and env may hold arbitrary bytes) are
// written with U+FFFD in place of the bad bytes, since JSON cannot carry them; a spec meant to
// round-trip exactly must be UTF-8.
std::string RunSpecToJson(const RunSpec& spec);
[[nodiscard]] Result<RunSpec> RunSpecFromJson(std::string_view json);

// A filtered run's NetworkReport (stored beside the record):
//   {"dns_admitted": ["allowed.test 203.0.113.10"], "dns_refused": ["denied.test"],
//    "dropped_packets": 3}
std::string NetworkReportToJson(const NetworkReport& report);
[[nodiscard]] Result<NetworkReport> NetworkReportFromJson(std::string_view json);

// A run's two log digests (stored beside the record; "{}" reads as both unsealed):
//   {"stdout": {"bytes": 12, "sha256": "...", "sealed": true}, "stderr": {...}}
std::string LogsToJson(const LogDigest& stdout_log, const LogDigest& stderr_log);
[[nodiscard]] Result<std::pair<LogDigest, LogDigest>> LogsFromJson(std::string_view json);

// What a run used (stored beside the record, and in status.json): every field, unset ones null.
std::string RunUsageToJson(const RunUsage& usage);
[[nodiscard]] Result<RunUsage> RunUsageFromJson(std::string_view json);

// `pretty`: indented by two spaces, for people; otherwise one line.

std::string RunRecordToJson(const RunRecord& record, bool pretty = false);
[[nodiscard]] Result<RunRecord> RunRecordFromJson(std::string_view json);

}  // namespace codespace
