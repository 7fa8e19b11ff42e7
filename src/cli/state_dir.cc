#include "cli/state_dir.h"

#include <unistd.h>

#include "base/file_util.h"

namespace codespace {

std::string DefaultStateDir() {
  std::string env = GetEnv("CODESPACE_STATE_DIR");
  if (!env.empty()) return env;
  if (::geteuid() == 0) return "/var/lib/codespace";
  std::string xdg = GetEnv("XDG_STATE_HOME");
  if (!xdg.empty()) return xdg + "/codespace";
  return GetEnv("HOME", "/tmp") + "/.local/state/codespace";
}

}  // namespace codespace
