// Where codespace keeps its records: CODESPACE_STATE_DIR, else /var/lib/codespace for root, else
// $XDG_STATE_HOME/codespace (default ~/.local/state/codespace).
#pragma once

#include <string>

namespace codespace {

std::string DefaultStateDir();

}  // namespace codespace
