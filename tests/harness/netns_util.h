// Named network namespaces for the test harness: create, enter from a thread, empty, remove, and
// sweep away the leftovers of harness processes that crashed.
//
// Every namespace the harness makes is named "<kHarnessPrefix><pid>-<seq>-<role>", the pid being
// the creating process's. A namespace whose pid is no longer alive belongs to a crashed run and
// may be removed by anyone (RemoveStaleHarnessNamespaces). Nothing here touches the root
// namespace's addresses, routes, sysctls or nftables: the commands run with `ip -n <name>`, and
// entering a namespace is done on a short-lived thread, never on the caller's.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace codespace::lanes {

// The prefix of every namespace (and scratch directory) the harness creates.
inline constexpr char kHarnessPrefix[] = "cst-";

// "/run/netns/<name>".
std::string NamedNetnsPath(std::string_view name);

// Whether /run/netns/<name> exists.
bool NamedNetnsExists(std::string_view name);

// The names under /run/netns (empty when the directory does not exist).
std::vector<std::string> ListNamedNetns();

// Runs `ip ARGS...`; a non-zero exit becomes an error naming the command and quoting its output.
[[nodiscard]] Status RunIp(const std::vector<std::string>& args);

// `ip netns add <name>`.
[[nodiscard]] Status AddNamedNetns(const std::string& name);

// Kills (SIGKILL, through a pidfd, after re-checking the namespace) every process whose network
// namespace is <name>'s, then `ip netns del <name>`. A name that does not exist is OK. The kernel
// frees the namespace, and with it every interface inside (veths included), once the last socket
// or process holding it is gone: callers close their sockets in it first.
[[nodiscard]] Status DeleteNamedNetns(const std::string& name);

// Runs `fn` on a new thread that has joined the network namespace at `ns_path`
// (setns(CLONE_NEWNET)), and waits for it. Sockets `fn` creates stay in that namespace after the
// thread ends, so a server thread anywhere can serve them. The caller's thread never moves.
[[nodiscard]] Status CallInNetns(const std::string& ns_path, const std::function<Status()>& fn);

// Parses "<kHarnessPrefix><pid>-<rest>" names: the pid, or nullopt for names that are not ours.
std::optional<pid_t> HarnessNamePid(std::string_view name);

// Whether `pid` names a live process (kill(pid, 0) succeeds or fails with EPERM).
bool PidAlive(pid_t pid);

// Deletes every harness namespace (/run/netns/<kHarnessPrefix><pid>-...-w or -i) whose creating
// pid is no longer alive, and every /tmp/<kHarnessPrefix><pid>-...-etc.* scratch directory
// likewise. Returns the namespace names removed.
Result<std::vector<std::string>> RemoveStaleHarnessNamespaces();

}  // namespace codespace::lanes
