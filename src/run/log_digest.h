// LogDigest: what a sealed log holds — its size and the sha256 of exactly those bytes.
#pragma once

#include <cstdint>
#include <string>

namespace codespace {

struct LogDigest {
  uint64_t bytes = 0;
  std::string sha256;  // lower-case hex; empty until sealed
  bool sealed = false;
  friend bool operator==(const LogDigest&, const LogDigest&) = default;
};

}  // namespace codespace
