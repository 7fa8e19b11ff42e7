// RunSpec: what a caller asks to run. A pure value, validated before anything is spent.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "policy/egress_policy.h"
#include "run/fs_view.h"
#include "run/run_limits.h"

namespace codespace {

// A broker the run reaches whatever its egress, through the relay (SPEC "broker"): inside the
// sandbox at http://127.0.0.1:<port>, announced in CODESPACE_BROKER_URL and in `env_names`.
struct BrokerSpec {
  std::string address;                 // "unix:/path" or "127.0.0.1:PORT" / "[::1]:PORT"; empty: none
  std::vector<std::string> env_names;  // more variables announcing the URL (e.g. ANTHROPIC_BASE_URL)
  bool empty() const { return address.empty(); }
  friend bool operator==(const BrokerSpec&, const BrokerSpec&) = default;
};

struct RunSpec {
  std::vector<std::string> argv;       // the command; argv[0] is searched on the run's PATH
  std::vector<std::string> env;        // KEY=VALUE; the sandbox's environment is exactly this
  std::string workspace;               // absolute; read-write inside, and the working directory
  EgressPolicy egress;
  std::chrono::seconds timeout{0};     // wall clock; 0 = none
  BrokerSpec broker;
  FsView fs;  // what of the host the run sees (run/fs_view.h)
  RunLimits limits;                    // memory, processes, CPU, /tmp size, open files
  // The syscall filter's one opt-in (docs/seccomp.md): ptrace, process_vm_readv/writev and
  // pidfd_getfd on the run's own processes, for debugging inside a run. Off by default.
  bool allow_ptrace = false;

  friend bool operator==(const RunSpec&, const RunSpec&) = default;
};

// A run id: 16 lower-case hex digits from the kernel's CSPRNG.
std::string NewRunId();
bool IsValidRunId(std::string_view id);

}  // namespace codespace
