// The CLI's everyday helpers (issue 20): "latest" wherever a run id is taken, saying so when no
// worker serves a state dir (rather than waiting in silence), waiting for a run's end, and the
// posture as JSON.
#pragma once

#include <atomic>
#include <string>

#include "base/status.h"
#include "posture/host_facts.h"
#include "store/run_record.h"
#include "store/run_store.h"

namespace codespace {

// A run id as it is; "latest" → the newest run's id (through the worker's API when it serves,
// else the store); anything else is a name → the newest run of that name (kNotFound: none).
Result<std::string> ResolveRunId(const std::string& state_dir, const std::string& id);

// What to tell the user when no worker answers on `state_dir`'s API socket (so a queued run
// waits for one); empty when a worker answers. Names the socket, the state dir and what to run.
std::string NoWorkerNotice(const std::string& state_dir);

// Waits until run `id` has ended (or `interrupted` is set: kUnavailable) and returns its final
// record. While the run is queued and no worker serves the state dir, says so on stderr once.
Result<RunRecord> WaitForEnd(const std::string& state_dir, const std::string& id,
                             const std::atomic<bool>& interrupted);

// With no worker serving `state_dir` (a worker looks itself, every few seconds): records every
// running run whose supervisor has ended it (status.json written, no supervisor holding the run)
// but nobody recorded — its foreground `run` died after the supervisor told it — so that `runs`
// and `show` do not show it running. A run whose supervisor died without a word is left to the
// worker (recording it lost tears its network down, with the host's tools).
void LookAtRunsInFlight(RunStore& store, const std::string& state_dir);

// The posture as a JSON object: the line, the refusal, and the facts behind them (the same
// fields as the API's GET /v1/posture).
std::string PostureJson(const HostFacts& facts);

}  // namespace codespace
