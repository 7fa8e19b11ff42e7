// Reads the host's layout for a run's view (sandbox/mount_list.h): lstat, readlink and realpath
// of each path the view asks about, and the SSH host keys present. A few dozen syscalls per
// launch; nothing is changed.
#pragma once

#include "run/fs_view.h"
#include "sandbox/mount_list.h"

namespace codespace {

HostLayout ReadHostLayout(const FsView& view);

// One path, looked up.
HostPath LookUpHostPath(const std::string& path);

}  // namespace codespace
