// A running run's record once its supervisor's status.json says how it ended: one function for
// every process that records a run (the worker, the foreground `codespace run`, and the
// supervisor itself when the `run` that started it is gone).
#pragma once

#include "store/run_record.h"
#include "supervisor/run_dir.h"

namespace codespace {

// `running` with the outcome, network report, sealed log digests, setup time and end time of
// `status` applied; an output error is appended to the reason.
RunRecord EndedRecord(const RunRecord& running, const RunStatus& status);

}  // namespace codespace
