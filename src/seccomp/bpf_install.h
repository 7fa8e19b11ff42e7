// Loading a compiled filter: no_new_privs, then seccomp(2), for the calling thread (callers are
// single-threaded when they load it: codespace-init before it forks, a test's forked child).
// Header-only and libc-only, because codespace-init (static, libc-light) uses it on an unconfined
// host, where no bubblewrap loads the filter for it.
#pragma once

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace codespace {

// 0, or the errno of the call that failed (EINVAL for a program that is not whole
// instructions). After it returns 0 the filter holds for this process and everything it execs
// or forks (threads made after it included), and cannot be removed.
inline int InstallBpfFilter(const void* program, size_t bytes) {
  if (bytes == 0 || bytes % sizeof(sock_filter) != 0 || bytes / sizeof(sock_filter) > 0xffff) {
    return EINVAL;
  }
  // Without no_new_privs an unprivileged process may not install a filter; with it, execve can
  // never grant privilege (setuid, file capabilities) the filter would then constrain.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  sock_fprog prog;
  prog.len = static_cast<unsigned short>(bytes / sizeof(sock_filter));
  prog.filter = static_cast<sock_filter*>(const_cast<void*>(program));
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    return errno;
  }
  return 0;
}

}  // namespace codespace
