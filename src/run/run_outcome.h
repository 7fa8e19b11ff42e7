// RunOutcome: how a run ended — a value, kept apart from the Status of codespace's own calls.
#pragma once

#include <optional>
#include <string>

#include "run/network_report.h"

namespace codespace {

struct RunOutcome {
  enum class Kind {
    kExited,        // the command exited with exit_code
    kSignaled,      // the command was killed by `signal`
    kTimedOut,      // the wall-clock timeout stopped the sandbox (SIGTERM, grace, SIGKILL);
                    // exit_code or signal: the command's own when it ended within the grace
    kCancelled,     // a cancel request stopped the sandbox (SIGTERM, grace, SIGKILL); as above
    kNotFound,      // the command does not exist (127)
    kCannotInvoke,  // the command exists but cannot be executed (126)
    kAborted,       // codespace could not set the run up; the command never started
  };
  Kind kind = Kind::kAborted;
  int exit_code = 0;
  int signal = 0;
  std::string reason;  // for everything but kExited/kSignaled
  NetworkReport network_report;  // a filtered run's DNS admissions, refusals, drops
  // Output capture that failed (e.g. the log's disk is full): the first error, per stream.
  std::string output_error;

  static RunOutcome Exited(int code) { return {Kind::kExited, code, 0, "", {}, ""}; }
  static RunOutcome Signaled(int sig) { return {Kind::kSignaled, 0, sig, "", {}, ""}; }
  static RunOutcome Aborted(std::string why) {
    return {Kind::kAborted, 0, 0, std::move(why), {}, ""};
  }

  // The exit status `codespace run` passes on, like `docker run`: the command's own code;
  // 128+N for a signal; 125 when codespace failed or refused; 126 cannot invoke; 127 not found.
  int ShellCode() const {
    switch (kind) {
      case Kind::kExited: return exit_code;
      case Kind::kSignaled: return 128 + signal;
      case Kind::kTimedOut:
      case Kind::kCancelled:
        return signal ? 128 + signal : exit_code;  // its own, in the grace
      case Kind::kNotFound: return 127;
      case Kind::kCannotInvoke: return 126;
      case Kind::kAborted: return 125;
    }
    return 125;
  }
};

inline constexpr int kExitCodespaceFailed = 125;

}  // namespace codespace
