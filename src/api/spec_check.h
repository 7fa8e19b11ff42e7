// Validation of a run spec submitted to the API, before anything is spent on it.
//
// Two steps, kept apart so the pure one can be fuzzed without a file system:
//   ParseSubmittedSpec  the strict JSON parser (store/record_json.h) plus what the API requires
//                       of every spec: a non-empty argv, env entries KEY=VALUE, a workspace that
//                       is absolute and free of "." / ".." components, a broker address that
//                       parses;
//   CheckSpecOnHost     what only the host can say: the workspace's realpath equals the given
//                       path (no symlink anywhere on it) and it is a directory; a unix broker
//                       path is a socket; the file-system view's binds and hides
//                       (CheckFsViewOnHost: the CLI's rules, one function).
// Every error names the field: SpecError{message, field}, e.g. field "egress.allowlist[1]".
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "run/run_spec.h"

namespace codespace::api {

struct SpecError {
  std::string message;
  std::string field;  // dotted path of the offending field; empty when it is the whole body
};

using SpecResult = std::variant<RunSpec, SpecError>;

SpecResult ParseSubmittedSpec(std::string_view body);
// OK: an empty optional-like SpecError (field and message empty).
// `state_dir`: the worker's, which no bind may show (empty: not checked).
SpecError CheckSpecOnHost(const RunSpec& spec, const std::string& state_dir = "");

// The quoted field path at the front of a record_json error ("run spec JSON: \"a.b\": what").
std::string FieldOfJsonError(std::string_view message);

}  // namespace codespace::api
