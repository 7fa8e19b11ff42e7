// A single-threaded process, forked by the worker before it starts any thread, that forks the
// worker's supervisors on request.
//
// The worker has API threads, so it must not fork a supervisor itself (a fork copies one thread,
// and a lock another thread holds stays held forever): it used to exec `codespace __supervise`
// for each run, paying the dynamic loader and a second store open (~5 ms a run). The spawner is
// forked while the worker is still one thread, and forks each supervisor the way the foreground
// `codespace run` does (ForkSupervisor), reading the run's record from the store.
//
// It dies with the worker (PR_SET_PDEATHSIG, and the end of its socket); the supervisors it
// forked do not (their own sessions; they are reparented). When it is gone or refuses, the caller
// falls back to exec.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>

#include "base/status.h"
#include "base/unique_fd.h"
#include "supervisor/run_dir.h"
#include "supervisor/supervisor.h"

namespace codespace {

class SupervisorSpawner {
 public:
  // Forks the spawner. The caller must have one thread (else FailedPrecondition, nothing forked).
  static Result<std::unique_ptr<SupervisorSpawner>> Start();
  // Closes the spawner's socket (it exits) and reaps it.
  ~SupervisorSpawner();
  SupervisorSpawner(const SupervisorSpawner&) = delete;
  SupervisorSpawner& operator=(const SupervisorSpawner&) = delete;

  // Has the spawner fork a supervisor for `a` (its record is read from the store) and returns its
  // identity. Safe from any thread.
  Result<ProcessIdentity> Spawn(const SupervisorArgs& a);

  pid_t pid() const { return pid_; }

 private:
  SupervisorSpawner(pid_t pid, UniqueFd socket) : pid_(pid), socket_(std::move(socket)) {}

  pid_t pid_;
  UniqueFd socket_;
  std::mutex mu_;  // one request at a time on the socket
};

}  // namespace codespace
