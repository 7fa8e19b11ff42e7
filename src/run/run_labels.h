// What a caller may attach to a run besides its spec: a name (`--name`, accepted wherever a run
// id is) and an idempotency key (`Idempotency-Key`, one run per key). Pure checks.
#pragma once

#include <string_view>

#include "base/status.h"

namespace codespace {

// A run name: 1 to 64 of [A-Za-z0-9._-], starting with a letter or digit, never "latest" and
// never shaped like a run id (16 hex digits): a name must never shadow an id.
Status CheckRunName(std::string_view name);

// An idempotency key: 1 to 255 printable ASCII characters (no spaces: it travels in a header).
Status CheckIdempotencyKey(std::string_view key);

}  // namespace codespace
