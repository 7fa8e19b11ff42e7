// The one check of a run spec, whoever was handed it: the CLI (flags), the API (JSON) and
// anything else that starts runs call these, so a spec is refused with the same rules and the
// same words everywhere, before anything is spent on it.
//
//   CheckSpec        pure: a non-empty argv without NUL bytes, env entries KEY=VALUE, a
//                    workspace that is absolute and free of "." / ".." / empty components, a
//                    broker address that parses (run/broker_address.h);
//   CheckSpecOnHost  what only the host can say: the workspace's realpath equals the given path
//                    (no symlink anywhere on it) and it is a directory; a unix broker path is a
//                    socket.
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
SpecError CheckSpecOnHost(const RunSpec& spec);

// Both, the first failure as InvalidArgument with the same message: for callers with a Status.
[[nodiscard]] Status CheckSpecStatus(const RunSpec& spec);

}  // namespace codespace
