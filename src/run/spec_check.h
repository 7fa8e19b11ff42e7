// The one check of a run spec, whoever was handed it: the CLI (flags), the API (JSON) and
// anything else that starts runs call these, so a spec is refused with the same rules and the
// same words everywhere, before anything is spent on it.
//
//   CheckSpec        pure: a non-empty argv without NUL bytes, env entries KEY=VALUE, a
//                    workspace that is absolute and free of "." / ".." / empty components, a
//                    broker address that parses (run/broker_address.h), a file-system view
//                    whose paths are absolute and normalised (ValidateFsView);
//   CheckSpecOnHost  what only the host can say: the workspace's realpath equals the given path
//                    (no symlink anywhere on it) and it is a directory; a unix broker path is a
//                    socket (or nothing: a broker that is down); the file-system view's binds
//                    and hides (run/fs_view.h), none of which may show `state_dir`.
// Every error names the field: SpecError{message, field}, e.g. field "broker.address".
#pragma once

#include <string>

#include "base/status.h"
#include "run/run_spec.h"

namespace codespace {

struct SpecError {
  std::string message;  // empty: no error
  std::string field;    // dotted path of the offending field; empty when it is the whole spec
  bool ok() const { return message.empty(); }
};

SpecError CheckSpec(const RunSpec& spec);
// `state_dir`: the worker's, which no bind may show (empty: not checked).
SpecError CheckSpecOnHost(const RunSpec& spec, const std::string& state_dir = "");

// Both, the first failure as InvalidArgument with the same message: for callers with a Status.
[[nodiscard]] Status CheckSpecStatus(const RunSpec& spec, const std::string& state_dir = "");

}  // namespace codespace
