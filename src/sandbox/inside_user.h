// Who a run is inside its sandbox: one ordinary user, the same on every host and plan, so that
// `id`, `whoami`, `ls -l`, `$HOME` and tools that look the user up (git, ssh) see an ordinary
// account. bubblewrap maps this uid to whatever host uid it runs as (the worker's, or a run's
// leased one); host files of any other owner show as nobody/nogroup.
#pragma once

#include <string>

namespace codespace {

inline constexpr int kInsideUid = 1000;
inline constexpr int kInsideGid = 1000;
inline constexpr const char* kInsideUserName = "user";
// The default view's private HOME (a tmpfs); the host view's HOME is the private /tmp, since
// bubblewrap cannot make a mount point in the read-only host /home.
inline constexpr const char* kInsideHome = "/home/user";
inline constexpr const char* kInsideHostViewHome = "/tmp";

// The synthetic /etc/passwd and /etc/group bound over the host's: root, the run's user (HOME
// `home`, shell /bin/sh), nobody/nogroup. Nothing of the host's accounts.
std::string InsidePasswd(const std::string& home);
std::string InsideGroup();

}  // namespace codespace
