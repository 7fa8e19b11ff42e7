// The wall clock, in the milliseconds records and caches store.
#pragma once

#include <cstdint>

namespace codespace {

// Milliseconds since the Unix epoch (system_clock): what a record's created/started/ended hold.
int64_t NowMs();

}  // namespace codespace
