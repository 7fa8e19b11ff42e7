#include "run/run_labels.h"

#include <fmt/format.h>

#include "run/run_spec.h"

namespace codespace {

Status CheckRunName(std::string_view name) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError(fmt::format("run name \"{}\": {}", name, why));
  };
  if (name.empty() || name.size() > 64) return bad("must be 1 to 64 characters");
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name[0])) return bad("must start with a letter or a digit");
  for (char c : name) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return bad("only A-Z a-z 0-9 . _ -");
  }
  if (name == "latest") return bad("\"latest\" already means the newest run");
  if (IsValidRunId(name)) return bad("looks like a run id (16 hex digits)");
  return OkStatus();
}

Status CheckIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > 255) {
    return InvalidArgumentError("idempotency key: must be 1 to 255 characters");
  }
  for (char c : key) {
    if (c <= 0x20 || c >= 0x7f) {
      return InvalidArgumentError("idempotency key: printable ASCII only, no spaces");
    }
  }
  return OkStatus();
}

}  // namespace codespace
