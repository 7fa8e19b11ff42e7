// The side of the syscall policy that touches libseccomp and the kernel: compiling the table
// (syscall_policy.h) to the BPF program bubblewrap (--seccomp FD) and codespace-init load.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "base/unique_fd.h"
#include "seccomp/syscall_policy.h"

namespace codespace {

// The policy for `options` as a classic-BPF program (struct sock_filter[], native byte order):
// the native architecture only, with a syscall of any other ABI killing the process (and, on
// x86_64, x32 numbers too: libseccomp treats them as another ABI). A syscall name that neither
// libseccomp nor this file's table of newer syscalls knows fails the compile, naming it: the
// filter is never built with a row missing.
[[nodiscard]] Result<std::string> CompileSeccompBpf(const SeccompOptions& options);

// A sealed-size memfd (O_CLOEXEC) holding `bpf`, its offset at 0: the descriptor handed to
// bubblewrap's --seccomp or codespace-init's --seccomp, which read it to the end.
[[nodiscard]] Result<UniqueFd> SeccompBpfFd(std::string_view bpf);

// The host fact behind `seccomp=` on the posture line: empty when this host's kernel takes
// seccomp filters and the default policy compiles here; otherwise why not, in words an
// operator can act on. Changes nothing.
std::string SeccompUnavailableReason();

}  // namespace codespace
