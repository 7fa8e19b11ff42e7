// LocalProcessRunner: admission of runs on this host into records.
//
// It holds the host facts probed at start: admission reads HostFiltersAllowlist from them once,
// and the plan it records is the plan the run's supervisor launches (it never decides again).
#pragma once

#include <string>
#include <vector>

#include "plan/admission.h"
#include "posture/host_facts.h"
#include "run/run_spec.h"
#include "store/run_store.h"

namespace codespace {

class LocalProcessRunner {
 public:
  LocalProcessRunner(HostFacts facts, RunStore* store) : facts_(std::move(facts)), store_(store) {}

  const HostFacts& facts() const { return facts_; }

  // The public admission: nothing is spent, nothing recorded.
  Admission Plan(const RunSpec& spec, const std::string& run_id) const {
    return Admit(facts_, spec, run_id);
  }

  // Admits and records a new run: queued when admitted, refused (with the reason) when not.
  [[nodiscard]] Result<RunRecord> Create(const RunSpec& spec);
  // The same for a run whose caller starts it at once (the foreground `codespace run`): recorded
  // running from the start, so creating and claiming it is one commit, not two. The caller
  // must then StartClaimed it (worker.h).
  [[nodiscard]] Result<RunRecord> CreateRunning(const RunSpec& spec);

 private:
  Result<RunRecord> Admitted(const RunSpec& spec, bool running);
  HostFacts facts_;
  RunStore* store_;
};

}  // namespace codespace
