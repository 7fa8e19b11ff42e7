#include "supervisor/ended_record.h"

#include "store/run_record.h"

namespace codespace {

RunRecord EndedRecord(const RunRecord& running, const RunStatus& status) {
  RunRecord r = running;
  ApplyOutcome(status.outcome, &r);
  r.network_report = status.outcome.network_report;
  r.stdout_log = status.stdout_log;
  r.stderr_log = status.stderr_log;
  r.setup_ms = status.setup_ms;
  if (status.host_uid) r.host_uid = *status.host_uid;
  if (status.host_gid) r.host_gid = *status.host_gid;
  r.usage = status.usage;
  if (!status.outcome.output_error.empty()) {
    r.reason = r.reason.empty() ? status.outcome.output_error
                                : r.reason + "; " + status.outcome.output_error;
  }
  if (status.ended_ms) r.ended_ms = status.ended_ms;
  return r;
}

}  // namespace codespace
