#include "cli/pty_session.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

namespace codespace {

namespace {
std::atomic<bool>* g_winch = nullptr;
void OnWindowChange(int) {
  if (g_winch) g_winch->store(true);
}
}  // namespace

Result<std::unique_ptr<TerminalSession>> TerminalSession::Open() {
  if (!::isatty(STDIN_FILENO)) {
    return FailedPreconditionError("-t needs a terminal on stdin (use -i for a pipe or a file)");
  }
  termios saved{};
  if (::tcgetattr(STDIN_FILENO, &saved) != 0) return ErrnoError("tcgetattr(stdin)", errno);
  winsize ws{};
  bool sized = ::ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0;
  int m = -1, s = -1;
  // The slave starts with the user's modes (a cooked terminal, as a login would give); the
  // command changes them as it likes.
  if (::openpty(&m, &s, nullptr, &saved, sized ? &ws : nullptr) != 0) {
    return ErrnoError("openpty", errno);
  }
  UniqueFd master(m), slave(s);
  ::fcntl(m, F_SETFD, FD_CLOEXEC);
  ::fcntl(s, F_SETFD, FD_CLOEXEC);
  termios raw = saved;
  ::cfmakeraw(&raw);
  if (::tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0)
    return ErrnoError("tcsetattr(stdin, raw)", errno);
  return std::unique_ptr<TerminalSession>(
      new TerminalSession(std::move(master), std::move(slave), saved));
}

void TerminalSession::PumpInput() {
  if (input_open_ && pending_.size() < 64 * 1024) {
    char buf[4096];
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
    if (n > 0) {
      pending_.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      input_open_ = false;  // the user's terminal hung up
    }
  }
  while (!pending_.empty()) {
    pollfd p{master_.get(), POLLOUT, 0};
    if (::poll(&p, 1, 0) <= 0 || !(p.revents & POLLOUT)) return;  // the pty is full: later
    ssize_t w = ::write(master_.get(), pending_.data(), pending_.size());
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) return;
      pending_.clear();  // the run's terminal is gone
      return;
    }
    pending_.erase(0, static_cast<size_t>(w));
  }
}

void TerminalSession::SyncWindowSize() {
  winsize ws{};
  if (::ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) ::ioctl(master_.get(), TIOCSWINSZ, &ws);
}

void TerminalSession::Restore() {
  if (!raw_) return;
  raw_ = false;
  ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
}

void TerminalSession::WatchWindowSize(std::atomic<bool>* flag) {
  g_winch = flag;
  struct sigaction sa {};
  sa.sa_handler = OnWindowChange;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGWINCH, &sa, nullptr);
}

}  // namespace codespace
