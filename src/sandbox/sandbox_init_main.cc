// codespace-init: the first program inside every bubblewrap sandbox.
//
//   codespace-init STATUS_FD [--seccomp FD] [--tty] [--relay PORT SOCKET NAME[,NAME...]]
//                  COMMAND [ARGS...]
//
// With --seccomp (unconfined runs: no bubblewrap loads the filter) it reads the run's compiled
// syscall filter from FD to its end, closes FD and loads the filter (no_new_privs, seccomp(2))
// before anything else — before the relay, before "started" — so that this process, the relay
// and the command are filtered exactly as a confined run is under bubblewrap's --seccomp. It
// takes the compiled program from an inherited descriptor rather than building it: init stays
// libc-only (no libseccomp in a static binary), it gets the very bytes the supervisor compiled
// and named, and no file on disk can be swapped for another program in between. If the filter
// cannot be loaded the command never starts (exit 125, no "started").
//
// With --tty (`codespace run -t`) its stdin is the run's own pty (never the user's terminal):
// it makes that its controlling terminal (in a session it leads) and runs the command in a
// process group of its own in the foreground, so Ctrl-C and Ctrl-Z typed there signal the
// command alone, not this init.
//
// With --relay it first starts the broker relay (a child: 127.0.0.1:PORT inside the sandbox →
// the bind-mounted SOCKET; PORT 0 picks one), waits until it listens, and sets every NAME to
// http://127.0.0.1:<port> for the command; the relay is killed when the command ends.
//
// bubblewrap reports a command killed by signal N as exit 128+N and a command it cannot execute
// as exit 1, so neither can be told from a command that exits with those codes. This init runs
// the command as its child and writes exactly how it ended to STATUS_FD, one line:
//   "exit N" | "signal N" | "exec-error ERRNO"
// After the command exits it stays, as the run's subreaper, until every descendant has exited
// too: background processes may still be writing the run's output, and the supervisor decides
// (after a grace) when to kill what is left. It depends on libc alone (it is exec'd on every
// launch) and keeps STATUS_FD out of the command (close-on-exec), so the command cannot forge
// its own record; it is not dumpable, so the command reaches neither STATUS_FD through
// /proc/<init>/fd nor this process through ptrace.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <initializer_list>
#include <string>

#include "relay/sandbox_relay.h"
#include "seccomp/bpf_install.h"

namespace {

volatile sig_atomic_t g_child = 0;

void Forward(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

void Report(int fd, const char* what, int n) {
  char line[64];
  int len = snprintf(line, sizeof(line), "%s %d\n", what, n);
  if (len > 0) {
    ssize_t ignored = write(fd, line, static_cast<size_t>(len));
    (void)ignored;
  }
}

// Reads the compiled filter from `fd` (to its end), closes it and loads it; 0 or an errno.
int LoadSeccompFrom(int fd) {
  std::string program;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) break;
    program.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return codespace::InstallBpfFilter(program.data(), program.size());
}

}  // namespace

int main(int argc, char** argv) {
  // Not dumpable: the command runs as this process's uid, which would otherwise let it open
  // /proc/<init>/fd/STATUS_FD (and write its own "exit 0") or ptrace this process. Set first,
  // before STATUS_FD is used; the command's execve makes it dumpable again (its own business),
  // and this process's relay child inherits the setting.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    fprintf(stderr, "codespace-init: prctl(PR_SET_DUMPABLE, 0): %s\n", strerror(errno));
    return 125;
  }
  if (argc < 3) {
    fprintf(
        stderr,
        "usage: codespace-init STATUS_FD [--seccomp FD] [--tty] [--relay PORT SOCKET NAMES] "
        "COMMAND...\n");
    return 125;
  }
  int status_fd = atoi(argv[1]);
  int cmd_index = 2;
  if (std::string(argv[cmd_index]) == "--seccomp") {
    if (argc < cmd_index + 3) {
      fprintf(stderr, "codespace-init: --seccomp needs FD and a command\n");
      return 125;
    }
    if (int err = LoadSeccompFrom(atoi(argv[cmd_index + 1])); err != 0) {
      fprintf(stderr, "codespace-init: cannot load the run's syscall filter: %s\n", strerror(err));
      return 125;
    }
    cmd_index += 2;
  }
  bool tty = false;
  if (std::string(argv[cmd_index]) == "--tty") {
    tty = true;
    ++cmd_index;
    if (argc <= cmd_index) return 125;
    // Only a session leader may take a controlling terminal. Confined, bubblewrap's
    // --new-session made its pid-namespace init the leader, not this process: a session of our
    // own, inside the sandbox (unconfined we lead one already and setsid fails harmlessly).
    if (getsid(0) != getpid()) setsid();
    if (ioctl(0, TIOCSCTTY, 0) != 0) {
      fprintf(stderr, "codespace-init: TIOCSCTTY on the run's terminal: %s\n", strerror(errno));
      tty = false;  // still a terminal, without job control
    }
  }
  pid_t relay = -1;
  if (std::string(argv[cmd_index]) == "--relay") {
    if (argc < cmd_index + 5) {
      fprintf(stderr, "codespace-init: --relay needs PORT SOCKET NAMES and a command\n");
      return 125;
    }
    const int relay_at = cmd_index;
    cmd_index += 4;
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) return 125;
    relay = fork();
    if (relay < 0) return 125;
    if (relay == 0) {
      close(ready[0]);
      _exit(codespace::RunSandboxRelay(static_cast<uint16_t>(atoi(argv[relay_at + 1])),
                                       argv[relay_at + 2], ready[1]));
    }
    close(ready[1]);
    char buf[64] = {0};
    ssize_t n;
    size_t got_bytes = 0;
    while ((n = read(ready[0], buf + got_bytes, sizeof(buf) - 1 - got_bytes)) > 0) {
      got_bytes += static_cast<size_t>(n);
    }
    close(ready[0]);
    if (got_bytes == 0 || buf[0] != 'R') {
      fprintf(stderr, "codespace-init: broker relay did not start: %s\n", got_bytes ? buf : "(no word)");
      Report(status_fd, "exec-error", ECONNREFUSED);
      kill(relay, SIGKILL);
      waitpid(relay, nullptr, 0);
      return 125;
    }
    int port = buf[1] >= '0' && buf[1] <= '9' ? atoi(buf + 1) : atoi(argv[relay_at + 1]);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    setenv("CODESPACE_BROKER_URL", url, 1);
    std::string names = argv[relay_at + 3];
    size_t start = 0;
    while (start <= names.size()) {
      size_t comma = names.find(',', start);
      std::string name = names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!name.empty() && name != "-") setenv(name.c_str(), url, 1);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (fcntl(status_fd, F_SETFD, FD_CLOEXEC) != 0) {
    fprintf(stderr, "codespace-init: status fd %d: %s\n", status_fd, strerror(errno));
    return 125;
  }
  // No reader (EPIPE, or SIGPIPE ends this process): the supervisor died while the sandbox was
  // being set up. The command must not run with nobody to bound it, record it or stop it.
  if (write(status_fd, "started\n", 8) != 8) return 125;
  // Orphaned descendants are reparented here (not to bubblewrap's init, nor, unconfined, to the
  // host's), so that this process sees them and the run ends only when they have.
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) return 125;

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaction(sig, &sa, nullptr);

  pid_t pid = fork();
  if (pid < 0) return 125;
  if (pid == 0) {
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) signal(sig, SIG_DFL);
    if (tty) {
      // Its own process group, in the terminal's foreground (SIGTTOU ignored for the call: a
      // background group may not otherwise set it), then the default again for the command.
      setpgid(0, 0);
      signal(SIGTTOU, SIG_IGN);
      tcsetpgrp(0, getpid());
      signal(SIGTTOU, SIG_DFL);
    }
    execvp(argv[cmd_index], argv + cmd_index);
    int err = errno;
    ssize_t ignored = write(exec_pipe[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  g_child = pid;
  close(exec_pipe[1]);
  int exec_errno = 0;
  ssize_t got;
  do {
    got = read(exec_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (got < 0 && errno == EINTR);
  close(exec_pipe[0]);

  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 125;
  }
  int code;
  if (got == static_cast<ssize_t>(sizeof(exec_errno))) {
    Report(status_fd, "exec-error", exec_errno);
    fprintf(stderr, "codespace: %s: %s\n", argv[cmd_index], strerror(exec_errno));
    code = exec_errno == ENOENT ? 127 : 126;
  } else if (WIFSIGNALED(status)) {
    Report(status_fd, "signal", WTERMSIG(status));
    code = 128 + WTERMSIG(status);
  } else {
    Report(status_fd, "exit", WEXITSTATUS(status));
    code = WEXITSTATUS(status);
  }
  close(status_fd);
  g_child = 0;
  // The relay never ends by itself; the run is over for it once the command is.
  if (relay > 0) {
    kill(relay, SIGKILL);
    waitpid(relay, nullptr, 0);
  }
  // Reap every descendant that outlives the command (they are ours, as subreaper).
  for (;;) {
    if (waitpid(-1, nullptr, 0) < 0 && errno == ECHILD) break;
  }
  return code;
}
