// Validation of a run spec submitted to the API, before anything is spent on it.
//
// Two steps, kept apart so the pure one can be fuzzed without a file system:
//   ParseSubmittedSpec  the strict JSON parser (store/record_json.h), then CheckSpec;
//   CheckSpecOnHost     what only the host can say.
// The rules themselves are the CLI's too: run/spec_check.h.
// Every error names the field: SpecError{message, field}, e.g. field "egress.allowlist[1]".
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "run/run_spec.h"
#include "run/spec_check.h"

namespace codespace::api {

using ::codespace::CheckSpecOnHost;
using ::codespace::SpecError;

using SpecResult = std::variant<RunSpec, SpecError>;

SpecResult ParseSubmittedSpec(std::string_view body);

// The quoted field path at the front of a record_json error ("run spec JSON: \"a.b\": what").
std::string FieldOfJsonError(std::string_view message);

}  // namespace codespace::api
