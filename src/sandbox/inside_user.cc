#include "sandbox/inside_user.h"

#include <fmt/format.h>

namespace codespace {

std::string InsidePasswd(const std::string& home) {
  return fmt::format(
      "root:x:0:0:root:/root:/bin/sh\n"
      "{0}:x:{1}:{2}:codespace run:{3}:/bin/sh\n"
      "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
      kInsideUserName, kInsideUid, kInsideGid, home);
}

std::string InsideGroup() {
  return fmt::format("root:x:0:\n{0}:x:{1}:\nnogroup:x:65534:\n", kInsideUserName, kInsideGid);
}

}  // namespace codespace
