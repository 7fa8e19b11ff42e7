#include "run/run_spec.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace codespace {

namespace {

constexpr size_t kRunIdBytes = 8;  // 16 hex digits
constexpr std::string_view kHexDigits = "0123456789abcdef";

}  // namespace

std::string NewRunId() {
  std::array<uint8_t, kRunIdBytes> bytes{};
  size_t filled = 0;
  while (filled < bytes.size()) {
    // Flags 0: the urandom source, blocking only until the kernel's CSPRNG is first seeded.
    ssize_t n = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      // Only ENOSYS (a kernel before 3.17) or a seccomp filter denying the call gets here. A
      // run id must not be guessable, and there is no safe weaker source to fall back on.
      const int err = errno;
      std::fputs(fmt::format("codespace: getrandom({}, 0): {}: cannot make a run id\n",
                             bytes.size() - filled, ErrnoText(err))
                     .c_str(),
                 stderr);
      std::abort();
    }
    filled += static_cast<size_t>(n);
  }
  std::string id;
  id.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    id.push_back(kHexDigits[b >> 4]);
    id.push_back(kHexDigits[b & 0x0F]);
  }
  return id;
}

bool IsValidRunId(std::string_view id) {
  if (id.size() != 2 * kRunIdBytes) return false;
  for (char c : id) {
    if (kHexDigits.find(c) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace codespace
