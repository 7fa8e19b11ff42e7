// TerminalSession: the foreground `codespace run -t`'s side of a run's pseudo-terminal.
//
// The run gets a pty of its own, made here: the slave becomes the command's stdin, stdout and
// stderr inside the sandbox (its controlling terminal: codespace-init --tty), the master is
// passed to the run's supervisor, which reads the command's output from it into the run's log
// as from a pipe. This process keeps a copy of the master to write what the user types into and
// to pass the window size on; the user sees the output by following the log, as without -t.
// The user's own terminal is put in raw mode for the run's life (every key, Ctrl-C and Ctrl-Z
// included, goes to the command's terminal, whose line discipline turns them into the command's
// signals — never codespace's) and restored by the destructor, on every way out of `run`.
//
// Why the pty is safe to hand to the sandbox: TIOCSTI (which bubblewrap's --new-session guards
// against on the user's terminal) pushes input into the terminal it is called on. The sandbox
// is never given the user's terminal with -t, only this pty's slave, so a TIOCSTI from inside
// reaches the run's own input and nothing else.
#pragma once

#include <termios.h>

#include <atomic>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace codespace {

class TerminalSession {
 public:
  // A new pty pair sized like stdin's terminal, and stdin's terminal put in raw mode.
  // kFailedPrecondition when stdin is not a terminal; errors name the failing call.
  [[nodiscard]] static Result<std::unique_ptr<TerminalSession>> Open();
  ~TerminalSession() { Restore(); }
  TerminalSession(const TerminalSession&) = delete;
  TerminalSession& operator=(const TerminalSession&) = delete;

  int master() const { return master_.get(); }
  int slave() const { return slave_.get(); }
  // Once the supervisor holds its copy: the master then reads EOF when the sandbox is gone.
  void CloseSlave() { slave_.reset(); }
  // stdin while it is open (for poll), else -1.
  int input_fd() const { return input_open_ ? 0 : -1; }
  // Moves what the user typed to the command's terminal. Never blocks for long: what the pty
  // cannot take now waits for the next call.
  void PumpInput();
  // The user's window size to the command's terminal (the kernel sends the command SIGWINCH).
  void SyncWindowSize();
  // The user's terminal as it was (idempotent).
  void Restore();

  // SIGWINCH sets `*flag`; the caller's loop calls SyncWindowSize.
  static void WatchWindowSize(std::atomic<bool>* flag);

 private:
  TerminalSession(UniqueFd master, UniqueFd slave, const termios& saved)
      : master_(std::move(master)), slave_(std::move(slave)), saved_(saved) {}
  UniqueFd master_, slave_;
  termios saved_{};
  bool raw_ = true;
  bool input_open_ = true;
  std::string pending_;
};

}  // namespace codespace
