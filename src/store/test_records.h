// Records for the store's tests: a full one, with an allowlist spec that exercises every kind of
// entry.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"
#include "policy/egress_policy.h"
#include "run/run_spec.h"
#include "store/run_record.h"

namespace codespace::testing {

inline Result<RunSpec> AllowlistSpec() {
  RunSpec spec;
  spec.argv = {"claude", "-p", "fix the failing test", "--output-format=json"};
  spec.env = {"HOME=/home/run", "PATH=/usr/bin:/bin", "LANG=C.UTF-8", "GREETING=h\u00e9llo \"q\""};
  spec.workspace = "/srv/workspaces/1a2b3c";
  spec.timeout = std::chrono::seconds(900);
  ASSIGN_OR_RETURN(spec.egress,
                   MakeEgressPolicy(SandboxEgressPolicy::kAllowlist,
                                    {"api.anthropic.com", "*.githubusercontent.com:443",
                                     "203.0.113.0/24", "[2001:db8::1]:8443"}));
  return spec;
}

// A record as a finished filtered run leaves it.
inline Result<RunRecord> FullRecord(std::string id) {
  RunRecord record;
  record.id = std::move(id);
  ASSIGN_OR_RETURN(record.spec, AllowlistSpec());
  record.plan = Plan::kFiltered;
  record.network = NetworkPosture::kFiltered;
  record.namespace_name = "cs-1a2b3c4d5e6f";
  record.state = RunState::kExited;
  record.exit_code = 3;
  record.reason = "";
  record.created_ms = 1'700'000'000'123;
  record.started_ms = 1'700'000'000'456;
  record.ended_ms = 1'700'000'090'789;
  record.setup_ms = 41;
  record.seccomp = "sha256:5ec0" + std::string(60, '0');
  return record;
}

}  // namespace codespace::testing
