// How records look on a terminal: `codespace show` and `codespace runs`.
#pragma once

#include <string>
#include <vector>

#include "store/run_record.h"

namespace codespace {

// Several lines, "field: value", for one record.
std::string FormatRecord(const RunRecord& record);
// A table with a header line, one run a line, newest first.
std::string FormatRecordTable(const std::vector<RunRecord>& records);

}  // namespace codespace
