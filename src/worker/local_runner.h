// LocalProcessRunner: admission, record and launch of one run on this host, in one place.
//
// It holds the host facts probed at start and hands the same value to admission and launch, so
// the plan a run was admitted with is the plan it is launched with (HostFiltersAllowlist is read
// once, here). Every state change is written to the store before the next step is taken.
#pragma once

#include <string>
#include <vector>

#include "net/address_pool.h"
#include "plan/admission.h"
#include "posture/host_facts.h"
#include "run/run_spec.h"
#include "sandbox/run_outcome.h"
#include "store/run_store.h"

namespace codespace {

struct RunnerConfig {
  std::string init_path;                 // codespace-init
  std::vector<std::string> hidden_dirs;  // masked inside sandboxes (the state dir)
  AddressPool pool = AddressPool::Default();  // CODESPACE_POOL_V4 / CODESPACE_POOL_V6
  std::string upstream_dns;  // CODESPACE_DNS_UPSTREAM ("ADDRESS" or "ADDRESS#PORT")
};

// The runner settings this process's environment gives (pool, upstream resolver).
Result<RunnerConfig> RunnerConfigFromEnvironment(RunnerConfig base);

class LocalProcessRunner {
 public:
  LocalProcessRunner(HostFacts facts, RunStore* store, RunnerConfig config)
      : facts_(std::move(facts)), store_(store), config_(std::move(config)) {}

  const HostFacts& facts() const { return facts_; }

  // The public admission: nothing is spent, nothing recorded.
  Admission Plan(const RunSpec& spec, const std::string& run_id) const {
    return Admit(facts_, spec, run_id);
  }

  // Admits and records a new run: queued when admitted, refused (with the reason) when not.
  [[nodiscard]] Result<RunRecord> Create(const RunSpec& spec);

  // Launches a queued run in the foreground, records running and then how it ended, and
  // returns the final record. Output goes to the given descriptors.
  [[nodiscard]] Result<RunRecord> Execute(const RunRecord& queued, int stdout_fd, int stderr_fd);

 private:
  HostFacts facts_;
  RunStore* store_;
  RunnerConfig config_;
};

// Fills a record's end from how the run ended.
void ApplyOutcome(const RunOutcome& outcome, RunRecord* record);

int64_t NowMs();

}  // namespace codespace
