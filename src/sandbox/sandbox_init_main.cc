// codespace-init: the first program inside every bubblewrap sandbox.
//
//   codespace-init STATUS_FD COMMAND [ARGS...]
//
// bubblewrap reports a command killed by signal N as exit 128+N and a command it cannot execute
// as exit 1, so neither can be told from a command that exits with those codes. This init runs
// the command as its child and writes exactly how it ended to STATUS_FD, one line:
//   "exit N" | "signal N" | "exec-error ERRNO"
// After the command exits it stays, as the run's subreaper, until every descendant has exited
// too: background processes may still be writing the run's output, and the supervisor decides
// (after a grace) when to kill what is left. It depends on libc alone (it is exec'd on every
// launch) and keeps STATUS_FD out of the command (close-on-exec), so the command cannot forge
// its own record.
#include <sys/prctl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <initializer_list>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: codespace-init STATUS_FD COMMAND [ARGS...]\n");
    return 125;
  }
  int status_fd = atoi(argv[1]);
  if (fcntl(status_fd, F_SETFD, FD_CLOEXEC) != 0) {
    fprintf(stderr, "codespace-init: status fd %d: %s\n", status_fd, strerror(errno));
    return 125;
  }
  {
    ssize_t ignored = write(status_fd, "started\n", 8);
    (void)ignored;
  }
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
    execvp(argv[2], argv + 2);
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
    fprintf(stderr, "codespace: %s: %s\n", argv[2], strerror(exec_errno));
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
  // Reap every descendant that outlives the command (they are ours, as subreaper).
  for (;;) {
    if (waitpid(-1, nullptr, 0) < 0 && errno == ECHILD) break;
  }
  return code;
}
