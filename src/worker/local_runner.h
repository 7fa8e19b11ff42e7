// LocalProcessRunner: admission of runs on this host into records.
//
// It holds the host facts probed at start: admission reads HostFiltersAllowlist from them once,
// and the plan it records is the plan the run's supervisor launches (it never decides again).
#pragma once

#include <string>
#include <vector>

#include "plan/admission.h"
#include "policy/public_suffix.h"
#include "posture/host_facts.h"
#include "run/run_spec.h"
#include "store/run_store.h"

namespace codespace {

// What a creator attaches to a run beside its spec (run/run_labels.h checks both).
struct CreateOptions {
  std::string name;             // empty: none
  std::string idempotency_key;  // empty: none
};

class LocalProcessRunner {
 public:
  LocalProcessRunner(HostFacts facts, RunStore* store) : facts_(std::move(facts)), store_(store) {}
  // Test seam: the public-suffix list wildcards are checked against (default: the system's).
  void set_public_suffixes(const PublicSuffixList* list) { public_suffixes_ = list; }

  const HostFacts& facts() const { return facts_; }

  // The public admission: nothing is spent, nothing recorded.
  Admission Plan(const RunSpec& spec, const std::string& run_id) const {
    return Admit(facts_, spec, run_id);
  }

  // A wildcard over a public suffix ("*.com", "*.co.uk") cannot mean what was meant: the reason,
  // as InvalidArgument, for the first such entry. Create refuses those runs before anything is
  // recorded; the public admission answers the same, so the two never disagree.
  [[nodiscard]] Status CheckWildcards(const RunSpec& spec) const;

  // Admits and records a new run: queued when admitted, refused (with the reason) when not.
  // With an idempotency key already used: the first run's record (`*replayed` set), never a
  // second run; kFailedPrecondition when that run's spec differs (a key names one submission).
  [[nodiscard]] Result<RunRecord> Create(const RunSpec& spec, const CreateOptions& options = {},
                                         bool* replayed = nullptr);
  // The same for a run whose caller starts it at once (the foreground `codespace run`): recorded
  // running from the start, so creating and claiming it is one commit, not two. The caller
  // must then StartClaimed it (worker.h).
  [[nodiscard]] Result<RunRecord> CreateRunning(const RunSpec& spec,
                                                const CreateOptions& options = {});

 private:
  Result<RunRecord> Admitted(const RunSpec& spec, bool running, const CreateOptions& options,
                             bool* replayed);
  Result<RunRecord> Replay(const RunSpec& spec, const RunRecord& first, bool* replayed) const;
  HostFacts facts_;
  RunStore* store_;
  const PublicSuffixList* public_suffixes_ = nullptr;
};

}  // namespace codespace
