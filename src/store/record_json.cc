#include "store/record_json.h"

#include <fmt/format.h>

#include <climits>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "plan/plan.h"
#include "policy/egress_policy.h"

namespace codespace {
namespace {

// Keeps fields in the order they are written, so that a record reads id first.
using Json = nlohmann::ordered_json;

std::string Child(std::string_view parent, std::string_view key) {
  return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

std::string Element(std::string_view parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

Status FieldError(std::string_view path, std::string_view what) {
  if (path.empty()) return InvalidArgumentError(std::string(what));
  return InvalidArgumentError(fmt::format("\"{}\": {}", path, what));
}

Status TypeError(std::string_view path, std::string_view expected, const Json& value) {
  return FieldError(path, fmt::format("expected {}, got {}", expected, value.type_name()));
}

// An object whose keys are all in `known`.
Json OptionalUintToValue(const std::optional<uint64_t>& n) {
  return n.has_value() ? Json(*n) : Json(nullptr);
}

Status CheckObject(const Json& value, std::string_view path,
                   std::initializer_list<std::string_view> known) {
  if (!value.is_object()) return TypeError(path, "an object", value);
  for (const auto& [key, unused] : value.items()) {
    bool is_known = false;
    for (std::string_view name : known) is_known = is_known || key == name;
    if (!is_known) return FieldError(Child(path, key), "unknown field");
  }
  return OkStatus();
}

// nullptr when `object` has no field `key`.
const Json* FindField(const Json& object, std::string_view key) {
  auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

Result<const Json*> RequiredField(const Json& object, std::string_view path, std::string_view key) {
  const Json* value = FindField(object, key);
  if (value == nullptr) return FieldError(Child(path, key), "missing");
  return value;
}

Result<std::string> ReadString(const Json& value, std::string_view path) {
  if (!value.is_string()) return TypeError(path, "a string", value);
  return value.get<std::string>();
}

Result<int64_t> ReadInt64(const Json& value, std::string_view path) {
  // nlohmann keeps non-negative integers as unsigned; one above INT64_MAX does not fit.
  if (value.is_number_unsigned()) {
    auto n = value.get<uint64_t>();
    if (n > static_cast<uint64_t>(INT64_MAX)) return FieldError(path, "integer out of range");
    return static_cast<int64_t>(n);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return TypeError(path, "an integer", value);
}

Result<std::optional<int>> ReadOptionalInt(const Json& value, std::string_view path) {
  if (value.is_null()) return std::optional<int>();
  ASSIGN_OR_RETURN(int64_t n, ReadInt64(value, path));
  if (n < INT_MIN || n > INT_MAX) return FieldError(path, "integer out of range");
  return std::optional<int>(static_cast<int>(n));
}

Result<std::optional<int64_t>> ReadOptionalInt64(const Json& value, std::string_view path) {
  if (value.is_null()) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t n, ReadInt64(value, path));
  return std::optional<int64_t>(n);
}

Result<std::vector<std::string>> ReadStringArray(const Json& value, std::string_view path) {
  if (!value.is_array()) return TypeError(path, "an array of strings", value);
  std::vector<std::string> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    ASSIGN_OR_RETURN(std::string text, ReadString(value[i], Element(path, i)));
    out.push_back(std::move(text));
  }
  return out;
}

Result<std::string> RequiredString(const Json& object, std::string_view path,
                                   std::string_view key) {
  ASSIGN_OR_RETURN(const Json* value, RequiredField(object, path, key));
  return ReadString(*value, Child(path, key));
}

Result<int64_t> RequiredInt64(const Json& object, std::string_view path, std::string_view key) {
  ASSIGN_OR_RETURN(const Json* value, RequiredField(object, path, key));
  return ReadInt64(*value, Child(path, key));
}

// Parses with a named field's path in the error, e.g. "plan": unknown plan "x".
template <typename T>
Result<T> ParseNamed(Result<T> parsed, std::string_view path) {
  if (!parsed.ok()) return FieldError(path, parsed.status().message());
  return parsed;
}

Json EgressToValue(const EgressPolicy& policy) {
  Json allowlist = Json::array();
  for (const AllowlistEntry& entry : policy.allowlist) allowlist.push_back(entry.ToString());
  Json value = Json::object();
  value["mode"] = std::string(EgressPolicyName(policy.mode));
  value["allowlist"] = std::move(allowlist);
  return value;
}

// The run's file-system view (run/fs_view.h): always written, so a record says which it got.
Json FsViewToValue(const FsView& view) {
  Json binds = Json::array();
  for (const FsBind& b : view.binds) {
    Json one = Json::object();
    one["source"] = b.source;
    one["destination"] = b.destination;
    one["read_only"] = b.read_only;
    binds.push_back(std::move(one));
  }
  Json value = Json::object();
  value["view"] = std::string(FsViewKindName(view.kind));
  value["binds"] = std::move(binds);
  value["hide"] = view.hides;
  return value;
}

// Every field may be missing: an absent "fs" (or "view") is the default view.
Result<FsView> FsViewFromValue(const Json& value, std::string_view path) {
  RETURN_IF_ERROR(CheckObject(value, path, {"view", "binds", "hide"}));
  FsView view;
  if (const Json* kind = FindField(value, "view")) {
    ASSIGN_OR_RETURN(std::string text, ReadString(*kind, Child(path, "view")));
    ASSIGN_OR_RETURN(view.kind, ParseNamed(ParseFsViewKind(text), Child(path, "view")));
  }
  if (const Json* binds = FindField(value, "binds")) {
    const std::string bpath = Child(path, "binds");
    if (!binds->is_array()) return TypeError(bpath, "an array of binds", *binds);
    for (size_t i = 0; i < binds->size(); ++i) {
      const Json& one = (*binds)[i];
      const std::string at = Element(bpath, i);
      RETURN_IF_ERROR(CheckObject(one, at, {"source", "destination", "read_only"}));
      FsBind b;
      ASSIGN_OR_RETURN(b.source, RequiredString(one, at, "source"));
      b.destination = b.source;
      if (const Json* dst = FindField(one, "destination")) {
        ASSIGN_OR_RETURN(b.destination, ReadString(*dst, Child(at, "destination")));
      }
      if (const Json* ro = FindField(one, "read_only")) {
        if (!ro->is_boolean()) return TypeError(Child(at, "read_only"), "a boolean", *ro);
        b.read_only = ro->get<bool>();
      }
      view.binds.push_back(std::move(b));
    }
  }
  if (const Json* hides = FindField(value, "hide")) {
    ASSIGN_OR_RETURN(view.hides, ReadStringArray(*hides, Child(path, "hide")));
  }
  return view;
}

// Limits (issue 15): sizes in bytes and cpus as a number of cores on output; on input a size may
// also be a string as the CLI takes it ("2G"), and cpus a string ("1.5").
Json LimitsToValue(const RunLimits& l) {
  Json value = Json::object();
  if (l.memory_bytes) value["memory"] = l.memory_bytes;
  if (l.pids) value["pids"] = l.pids;
  if (l.cpu_millis) value["cpus"] = static_cast<double>(l.cpu_millis) / 1000.0;
  if (l.tmp_bytes) value["tmp_size"] = l.tmp_bytes;
  if (l.nofile) value["nofile"] = l.nofile;
  return value;
}

Result<uint64_t> ReadLimit(const Json& v, std::string_view path,
                           Result<uint64_t> (*parse)(std::string_view), bool allow_fraction) {
  std::string text;
  if (v.is_string()) {
    text = v.get<std::string>();
  } else if (v.is_number_unsigned()) {
    text = std::to_string(v.get<uint64_t>());
  } else if (allow_fraction && v.is_number_float()) {
    text = fmt::format("{}", v.get<double>());
  } else {
    return TypeError(path, allow_fraction ? "a number or a string" : "an integer or a string", v);
  }
  Result<uint64_t> parsed = parse(text);
  if (!parsed.ok()) return FieldError(path, parsed.status().message());
  return *parsed;
}

Result<RunLimits> LimitsFromValue(const Json& value, std::string_view path) {
  RETURN_IF_ERROR(CheckObject(value, path, {"memory", "pids", "cpus", "tmp_size", "nofile"}));
  RunLimits l;
  struct Field {
    const char* key;
    uint64_t RunLimits::*field;
    Result<uint64_t> (*parse)(std::string_view);
    bool fraction;
  };
  for (const Field& f : {Field{"memory", &RunLimits::memory_bytes, ParseByteSize, false},
                         Field{"pids", &RunLimits::pids, ParseCount, false},
                         Field{"cpus", &RunLimits::cpu_millis, ParseCpus, true},
                         Field{"tmp_size", &RunLimits::tmp_bytes, ParseByteSize, false},
                         Field{"nofile", &RunLimits::nofile, ParseCount, false}}) {
    if (const Json* v = FindField(value, f.key)) {
      ASSIGN_OR_RETURN(l.*f.field, ReadLimit(*v, Child(path, f.key), f.parse, f.fraction));
    }
  }
  return l;
}

Json UsageToValue(const RunUsage& u) {
  Json value = Json::object();
  value["peak_memory_bytes"] = OptionalUintToValue(u.peak_memory_bytes);
  value["cpu_user_usec"] = OptionalUintToValue(u.cpu_user_usec);
  value["cpu_system_usec"] = OptionalUintToValue(u.cpu_system_usec);
  value["peak_pids"] = OptionalUintToValue(u.peak_pids);
  value["oom_kills"] = OptionalUintToValue(u.oom_kills);
  value["limit_kill"] = u.limit_kill;
  return value;
}

Result<RunUsage> UsageFromValue(const Json& value, std::string_view path) {
  RETURN_IF_ERROR(CheckObject(value, path,
                              {"peak_memory_bytes", "cpu_user_usec", "cpu_system_usec", "peak_pids",
                               "oom_kills", "limit_kill"}));
  RunUsage u;
  for (auto [key, field] : {std::pair{"peak_memory_bytes", &RunUsage::peak_memory_bytes},
                            std::pair{"cpu_user_usec", &RunUsage::cpu_user_usec},
                            std::pair{"cpu_system_usec", &RunUsage::cpu_system_usec},
                            std::pair{"peak_pids", &RunUsage::peak_pids},
                            std::pair{"oom_kills", &RunUsage::oom_kills}}) {
    const Json* v = FindField(value, key);
    if (!v || v->is_null()) continue;
    if (!v->is_number_unsigned()) return TypeError(Child(path, key), "a non-negative integer", *v);
    u.*field = v->get<uint64_t>();
  }
  if (const Json* v = FindField(value, "limit_kill")) {
    ASSIGN_OR_RETURN(u.limit_kill, ReadString(*v, Child(path, "limit_kill")));
  }
  return u;
}

Json SpecToValue(const RunSpec& spec) {
  Json value = Json::object();
  value["argv"] = spec.argv;
  value["env"] = spec.env;
  value["workspace"] = spec.workspace;
  value["egress"] = EgressToValue(spec.egress);
  value["timeout_seconds"] = static_cast<int64_t>(spec.timeout.count());
  if (!spec.broker.empty()) {
    Json b = Json::object();
    b["address"] = spec.broker.address;
    b["env"] = spec.broker.env_names;
    value["broker"] = b;
  }
  value["fs"] = FsViewToValue(spec.fs);
  if (!spec.limits.empty()) value["limits"] = LimitsToValue(spec.limits);
  if (spec.allow_ptrace) value["allow_ptrace"] = true;  // absent: off (older records too)
  return value;
}

template <typename Int>
Json OptionalIntToValue(const std::optional<Int>& n) {
  return n.has_value() ? Json(*n) : Json(nullptr);
}

Json NetworkReportToValue(const NetworkReport& r) {
  Json value = Json::object();
  value["dns_admitted"] = r.dns_admitted;
  value["dns_refused"] = r.dns_refused;
  value["dropped_packets"] = r.dropped_packets;
  value["broker_connections"] = r.broker_connections;
  value["broker_failed"] = r.broker_failed;
  value["broker_bytes_to"] = r.broker_bytes_to;
  value["broker_bytes_from"] = r.broker_bytes_from;
  return value;
}

Json DigestToValue(const LogDigest& d) {
  Json v = Json::object();
  v["bytes"] = d.bytes;
  v["sha256"] = d.sha256;
  v["sealed"] = d.sealed;
  return v;
}

Json LogsToValue(const LogDigest& out, const LogDigest& err) {
  Json v = Json::object();
  v["stdout"] = DigestToValue(out);
  v["stderr"] = DigestToValue(err);
  return v;
}

Result<LogDigest> DigestFromValue(const Json& value, std::string_view path) {
  RETURN_IF_ERROR(CheckObject(value, path, {"bytes", "sha256", "sealed"}));
  LogDigest d;
  ASSIGN_OR_RETURN(int64_t bytes, RequiredInt64(value, path, "bytes"));
  if (bytes < 0) return FieldError(Child(path, "bytes"), "must not be negative");
  d.bytes = static_cast<uint64_t>(bytes);
  ASSIGN_OR_RETURN(d.sha256, RequiredString(value, path, "sha256"));
  ASSIGN_OR_RETURN(const Json* sealed, RequiredField(value, path, "sealed"));
  if (!sealed->is_boolean()) return FieldError(Child(path, "sealed"), "must be a boolean");
  d.sealed = sealed->get<bool>();
  return d;
}

Result<std::pair<LogDigest, LogDigest>> LogsFromValue(const Json& value, std::string_view path) {
  RETURN_IF_ERROR(CheckObject(value, path, {"stdout", "stderr"}));
  std::pair<LogDigest, LogDigest> logs;
  if (const Json* out = FindField(value, "stdout")) {
    ASSIGN_OR_RETURN(logs.first, DigestFromValue(*out, Child(path, "stdout")));
  }
  if (const Json* err = FindField(value, "stderr")) {
    ASSIGN_OR_RETURN(logs.second, DigestFromValue(*err, Child(path, "stderr")));
  }
  return logs;
}

Json RecordToValue(const RunRecord& record) {
  Json value = Json::object();
  value["id"] = record.id;
  value["spec"] = SpecToValue(record.spec);
  value["plan"] = std::string(PlanName(record.plan));
  value["network"] = std::string(NetworkPostureName(record.network));
  value["namespace"] = record.namespace_name;
  value["state"] = std::string(RunStateName(record.state));
  value["exit_code"] = OptionalIntToValue(record.exit_code);
  value["signal"] = OptionalIntToValue(record.signal);
  value["reason"] = record.reason;
  value["created_ms"] = record.created_ms;
  value["started_ms"] = record.started_ms;
  value["ended_ms"] = record.ended_ms;
  value["setup_ms"] = OptionalIntToValue(record.setup_ms);
  value["host_uid"] = OptionalIntToValue(record.host_uid);
  value["host_gid"] = OptionalIntToValue(record.host_gid);
  value["seccomp"] = record.seccomp;
  value["network_report"] = NetworkReportToValue(record.network_report);
  value["logs"] = LogsToValue(record.stdout_log, record.stderr_log);
  value["name"] = record.name;
  value["idempotency_key"] = record.idempotency_key;
  if (!record.usage.empty()) value["usage"] = UsageToValue(record.usage);
  return value;
}

Result<EgressPolicy> EgressFromValue(const Json& value, std::string_view path) {
  RETURN_IF_ERROR(CheckObject(value, path, {"mode", "allowlist"}));
  ASSIGN_OR_RETURN(std::string mode_text, RequiredString(value, path, "mode"));
  ASSIGN_OR_RETURN(SandboxEgressPolicy mode,
                   ParseNamed(ParseEgressPolicy(mode_text), Child(path, "mode")));
  std::vector<std::string> entries;
  const std::string allowlist_path = Child(path, "allowlist");
  if (const Json* allowlist = FindField(value, "allowlist")) {
    ASSIGN_OR_RETURN(entries, ReadStringArray(*allowlist, allowlist_path));
  }
  // Entry by entry first, so that an error points at the bad entry.
  for (size_t i = 0; i < entries.size(); ++i) {
    Result<AllowlistEntry> entry = ParseAllowlistEntry(entries[i]);
    if (!entry.ok()) return FieldError(Element(allowlist_path, i), entry.status().message());
  }
  return ParseNamed(MakeEgressPolicy(mode, entries), path);
}

Result<RunSpec> SpecFromValue(const Json& value, std::string_view path) {
  RETURN_IF_ERROR(CheckObject(value, path,
                              {"argv", "env", "workspace", "egress", "timeout_seconds", "broker",
                               "fs", "limits", "allow_ptrace"}));
  RunSpec spec;
  ASSIGN_OR_RETURN(const Json* argv, RequiredField(value, path, "argv"));
  ASSIGN_OR_RETURN(spec.argv, ReadStringArray(*argv, Child(path, "argv")));
  if (const Json* env = FindField(value, "env")) {
    ASSIGN_OR_RETURN(spec.env, ReadStringArray(*env, Child(path, "env")));
  }
  ASSIGN_OR_RETURN(spec.workspace, RequiredString(value, path, "workspace"));
  ASSIGN_OR_RETURN(const Json* egress, RequiredField(value, path, "egress"));
  ASSIGN_OR_RETURN(spec.egress, EgressFromValue(*egress, Child(path, "egress")));
  if (const Json* timeout = FindField(value, "timeout_seconds")) {
    const std::string timeout_path = Child(path, "timeout_seconds");
    ASSIGN_OR_RETURN(int64_t seconds, ReadInt64(*timeout, timeout_path));
    if (seconds < 0) return FieldError(timeout_path, "must not be negative");
    spec.timeout = std::chrono::seconds(seconds);
  }
  if (const Json* broker = FindField(value, "broker")) {
    const std::string bpath = Child(path, "broker");
    RETURN_IF_ERROR(CheckObject(*broker, bpath, {"address", "env"}));
    ASSIGN_OR_RETURN(spec.broker.address, RequiredString(*broker, bpath, "address"));
    if (const Json* names = FindField(*broker, "env")) {
      ASSIGN_OR_RETURN(spec.broker.env_names, ReadStringArray(*names, Child(bpath, "env")));
    }
  }
  if (const Json* fs = FindField(value, "fs")) {
    ASSIGN_OR_RETURN(spec.fs, FsViewFromValue(*fs, Child(path, "fs")));
  }
  if (const Json* limits = FindField(value, "limits")) {
    ASSIGN_OR_RETURN(spec.limits, LimitsFromValue(*limits, Child(path, "limits")));
  }
  if (const Json* trace = FindField(value, "allow_ptrace")) {
    if (!trace->is_boolean()) return FieldError(Child(path, "allow_ptrace"), "must be a boolean");
    spec.allow_ptrace = trace->get<bool>();
  }
  return spec;
}

Result<NetworkReport> NetworkReportFromValue(const Json& value, std::string_view path) {
  RETURN_IF_ERROR(CheckObject(value, path,
                              {"dns_admitted", "dns_refused", "dropped_packets",
                               "broker_connections", "broker_failed", "broker_bytes_to",
                               "broker_bytes_from"}));
  // Every field may be missing (a report written before it existed reads as zero/empty).
  NetworkReport r;
  if (const Json* admitted = FindField(value, "dns_admitted")) {
    ASSIGN_OR_RETURN(r.dns_admitted, ReadStringArray(*admitted, Child(path, "dns_admitted")));
  }
  if (const Json* refused = FindField(value, "dns_refused")) {
    ASSIGN_OR_RETURN(r.dns_refused, ReadStringArray(*refused, Child(path, "dns_refused")));
  }
  for (auto [name, field] : {std::pair<const char*, uint64_t*>{"dropped_packets", &r.dropped_packets},
                             {"broker_connections", &r.broker_connections},
                             {"broker_failed", &r.broker_failed},
                             {"broker_bytes_to", &r.broker_bytes_to},
                             {"broker_bytes_from", &r.broker_bytes_from}}) {
    if (!FindField(value, name)) continue;
    ASSIGN_OR_RETURN(int64_t n, RequiredInt64(value, path, name));
    if (n < 0) return FieldError(Child(path, name), "must not be negative");
    *field = static_cast<uint64_t>(n);
  }
  return r;
}

Result<RunRecord> RecordFromValue(const Json& value) {
  RETURN_IF_ERROR(CheckObject(value, "",
                              {"id", "spec", "plan", "network", "namespace", "state", "exit_code",
                               "signal", "reason", "created_ms", "started_ms", "ended_ms",
                               "setup_ms", "host_uid", "host_gid", "network_report", "logs",
                               "name", "idempotency_key", "usage", "seccomp"}));
  RunRecord record;
  ASSIGN_OR_RETURN(record.id, RequiredString(value, "", "id"));
  ASSIGN_OR_RETURN(const Json* spec, RequiredField(value, "", "spec"));
  ASSIGN_OR_RETURN(record.spec, SpecFromValue(*spec, "spec"));
  ASSIGN_OR_RETURN(std::string plan, RequiredString(value, "", "plan"));
  ASSIGN_OR_RETURN(record.plan, ParseNamed(ParsePlan(plan), "plan"));
  ASSIGN_OR_RETURN(std::string network, RequiredString(value, "", "network"));
  ASSIGN_OR_RETURN(record.network, ParseNamed(ParseNetworkPosture(network), "network"));
  ASSIGN_OR_RETURN(record.namespace_name, RequiredString(value, "", "namespace"));
  ASSIGN_OR_RETURN(std::string state, RequiredString(value, "", "state"));
  ASSIGN_OR_RETURN(record.state, ParseNamed(ParseRunState(state), "state"));
  ASSIGN_OR_RETURN(const Json* exit_code, RequiredField(value, "", "exit_code"));
  ASSIGN_OR_RETURN(record.exit_code, ReadOptionalInt(*exit_code, "exit_code"));
  ASSIGN_OR_RETURN(const Json* signal, RequiredField(value, "", "signal"));
  ASSIGN_OR_RETURN(record.signal, ReadOptionalInt(*signal, "signal"));
  ASSIGN_OR_RETURN(record.reason, RequiredString(value, "", "reason"));
  ASSIGN_OR_RETURN(record.created_ms, RequiredInt64(value, "", "created_ms"));
  ASSIGN_OR_RETURN(record.started_ms, RequiredInt64(value, "", "started_ms"));
  ASSIGN_OR_RETURN(record.ended_ms, RequiredInt64(value, "", "ended_ms"));
  // Optional, unlike the rest: a worker from before it answers a newer CLI without it.
  if (const Json* setup = FindField(value, "setup_ms")) {
    ASSIGN_OR_RETURN(record.setup_ms, ReadOptionalInt64(*setup, "setup_ms"));
    if (record.setup_ms && *record.setup_ms < 0) {
      return FieldError("setup_ms", "must not be negative");
    }
  }
  for (auto [name, field] :
       {std::pair{"host_uid", &record.host_uid}, std::pair{"host_gid", &record.host_gid}}) {
    if (const Json* id = FindField(value, name)) {
      ASSIGN_OR_RETURN(*field, ReadOptionalInt64(*id, name));
      if (*field && (**field < 0 || **field > UINT32_MAX)) {
        return FieldError(name, "must be a uid (0..4294967295)");
      }
    }
  }
  ASSIGN_OR_RETURN(const Json* report, RequiredField(value, "", "network_report"));
  ASSIGN_OR_RETURN(record.network_report, NetworkReportFromValue(*report, "network_report"));
  ASSIGN_OR_RETURN(const Json* logs, RequiredField(value, "", "logs"));
  ASSIGN_OR_RETURN(auto both, LogsFromValue(*logs, "logs"));
  record.stdout_log = both.first;
  record.stderr_log = both.second;
  // Optional, as setup_ms: an older worker answers without them.
  if (FindField(value, "name")) {
    ASSIGN_OR_RETURN(record.name, RequiredString(value, "", "name"));
  }
  if (FindField(value, "idempotency_key")) {
    ASSIGN_OR_RETURN(record.idempotency_key, RequiredString(value, "", "idempotency_key"));
  }
  if (const Json* usage = FindField(value, "usage")) {
    ASSIGN_OR_RETURN(record.usage, UsageFromValue(*usage, "usage"));
  }
  // Optional too: records and workers from before the syscall filter have none.
  if (const Json* seccomp = FindField(value, "seccomp")) {
    if (!seccomp->is_string()) return FieldError("seccomp", "must be a string");
    record.seccomp = seccomp->get<std::string>();
  }
  return record;
}

// The edge where nlohmann's exceptions stop: parses `text` and hands the value to `convert`.
template <typename T, typename Convert>
Result<T> ParseWith(std::string_view text, std::string_view what, Convert convert) {
  try {
    Json value = Json::parse(text.begin(), text.end());
    Result<T> converted = convert(value);
    if (!converted.ok()) {
      return Status(converted.status().code(),
                    fmt::format("{}: {}", what, converted.status().message()));
    }
    return converted;
  } catch (const Json::parse_error& e) {
    return InvalidArgumentError(fmt::format("{}: {}", what, e.what()));
  } catch (const std::exception& e) {
    return InternalError(fmt::format("{}: {}", what, e.what()));
  }
}

// With error_handler_t::replace, dump() does not throw on invalid UTF-8 (type_error 316): the bad
// bytes become U+FFFD. Nothing else in dump() throws but bad_alloc.
std::string Dump(const Json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace

std::string RunSpecToJson(const RunSpec& spec) { return Dump(SpecToValue(spec), -1); }

Result<RunSpec> RunSpecFromJson(std::string_view json) {
  return ParseWith<RunSpec>(json, "run spec JSON",
                            [](const Json& value) { return SpecFromValue(value, ""); });
}

std::string RunRecordToJson(const RunRecord& record, bool pretty) {
  return Dump(RecordToValue(record), pretty ? 2 : -1);
}

Result<RunRecord> RunRecordFromJson(std::string_view json) {
  return ParseWith<RunRecord>(json, "run record JSON",
                              [](const Json& value) { return RecordFromValue(value); });
}

}  // namespace codespace

namespace codespace {

std::string NetworkReportToJson(const NetworkReport& report) {
  return NetworkReportToValue(report).dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<NetworkReport> NetworkReportFromJson(std::string_view json) {
  return ParseWith<NetworkReport>(json, "network report JSON", [](const Json& v) {
    return NetworkReportFromValue(v, "");
  });
}

}  // namespace codespace

namespace codespace {

std::string LogsToJson(const LogDigest& stdout_log, const LogDigest& stderr_log) {
  return LogsToValue(stdout_log, stderr_log).dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<std::pair<LogDigest, LogDigest>> LogsFromJson(std::string_view json) {
  return ParseWith<std::pair<LogDigest, LogDigest>>(
      json, "logs JSON", [](const Json& v) { return LogsFromValue(v, ""); });
}

}  // namespace codespace

namespace codespace {

std::string RunUsageToJson(const RunUsage& usage) {
  return UsageToValue(usage).dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<RunUsage> RunUsageFromJson(std::string_view json) {
  return ParseWith<RunUsage>(json, "usage JSON",
                             [](const Json& v) { return UsageFromValue(v, ""); });
}

}  // namespace codespace
