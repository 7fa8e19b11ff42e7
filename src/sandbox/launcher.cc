#include "sandbox/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "base/file_util.h"
#include "base/process.h"
#include "base/unique_fd.h"
#include "net/netns.h"
#include "sandbox/bwrap_args.h"

namespace codespace {

namespace {

using Clock = std::chrono::steady_clock;

// The fds a sandboxed command's init inherits, by number inside the sandbox.
constexpr int kStatusFd = 3;
constexpr int kInfoFd = 4;

std::optional<Clock::time_point> Deadline(const RunSpec& spec) {
  if (spec.timeout.count() <= 0) return std::nullopt;
  return Clock::now() + spec.timeout;
}

std::chrono::milliseconds Remaining(std::optional<Clock::time_point> deadline) {
  if (!deadline) return std::chrono::milliseconds(-1);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
  return left.count() < 0 ? std::chrono::milliseconds(0) : left;
}

std::string TimeoutReason(const RunSpec& spec) {
  return fmt::format("wall-clock timeout of {}s reached; the whole sandbox was killed",
                     spec.timeout.count());
}

RunOutcome TimedOut(const RunSpec& spec) {
  RunOutcome o;
  o.kind = RunOutcome::Kind::kTimedOut;
  o.signal = SIGKILL;
  o.reason = TimeoutReason(spec);
  return o;
}

// Parses codespace-init's last status line ("started" comes first, then how the command ended).
std::optional<RunOutcome> ParseInitStatus(std::string text, const std::string& command) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  size_t nl = text.rfind('\n');
  if (nl != std::string::npos) text = text.substr(nl + 1);
  int n = 0;
  if (std::sscanf(text.c_str(), "exit %d", &n) == 1) return RunOutcome::Exited(n);
  if (std::sscanf(text.c_str(), "signal %d", &n) == 1) return RunOutcome::Signaled(n);
  if (std::sscanf(text.c_str(), "exec-error %d", &n) == 1) {
    RunOutcome o;
    o.kind = n == ENOENT ? RunOutcome::Kind::kNotFound : RunOutcome::Kind::kCannotInvoke;
    o.reason = fmt::format("cannot run {}: {}", command, ErrnoText(n));
    return o;
  }
  return std::nullopt;
}

// Confined: bubblewrap, with codespace-init reporting the command's end through a pipe.
RunOutcome LaunchConfined(const LaunchRequest& r, FilteredEgressNetns* net) {
  auto status_pipe = MakePipe();
  auto info_pipe = MakePipe();
  if (!status_pipe.ok() || !info_pipe.ok()) {
    return RunOutcome::Aborted(
        fmt::format("sandbox setup failed: {}",
                    (!status_pipe.ok() ? status_pipe.status() : info_pipe.status()).message()));
  }
  BwrapLayout l;
  l.bwrap_path = r.bwrap_path;
  // Shared keeps the worker's namespace; Filtered the run's (bubblewrap is started inside it).
  l.share_network = r.decision.plan == Plan::kShared || net != nullptr;
  if (net) l.ro_files.emplace_back(net->resolv_conf_path(), "/etc/resolv.conf");
  l.workspace = r.spec.workspace;
  l.hidden_dirs = r.hidden_dirs;
  l.env = SandboxEnvironment(r.spec.env);
  l.info_fd = kInfoFd;
  l.init_path = r.init_path;
  l.command = {kSandboxInitPath, std::to_string(kStatusFd)};
  for (const auto& a : r.spec.argv) l.command.push_back(a);

  SpawnOptions o;
  o.argv = BuildBwrapArgv(l);
  o.env = std::vector<std::string>{};  // bubblewrap itself needs none; the run's is in --setenv
  o.fds = {{r.stdout_fd, 1},
           {r.stderr_fd, 2},
           {status_pipe->write.get(), kStatusFd},
           {info_pipe->write.get(), kInfoFd}};
  if (net) o.netns_fd = net->netns_fd();
  // Held until the sandbox's mounts are made (codespace-init says "started"): see NetnsMountLock.
  auto mount_lock = NetnsMountLock::Shared();
  if (!mount_lock.ok()) {
    return RunOutcome::Aborted(fmt::format("sandbox setup failed: {}", mount_lock.status().message()));
  }
  auto child = Spawn(o);
  status_pipe->write.reset();
  info_pipe->write.reset();
  if (!child.ok()) {
    return RunOutcome::Aborted(fmt::format("sandbox setup failed: {}", child.status().message()));
  }

  // Wait for bubblewrap, reading its info (the sandbox init's pid) as it comes. That pid's
  // pidfd is what the timeout kills: SIGKILL to a pid namespace's init kills everything in it.
  auto deadline = Deadline(r.spec);
  std::string info;
  UniqueFd sandbox_init_pidfd;
  bool info_open = true;
  std::optional<ExitStatus> bwrap_status;
  bool timed_out = false;
  std::string status_text;
  bool status_open = true;
  while (!bwrap_status) {
    pollfd fds[3] = {{child->pidfd(), POLLIN, 0},
                     {status_open ? status_pipe->read.get() : -1, POLLIN, 0},
                     {info_open ? info_pipe->read.get() : -1, POLLIN, 0}};
    int rc = ::poll(fds, 3, static_cast<int>(Remaining(deadline).count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) {
      timed_out = true;
      if (sandbox_init_pidfd) {
        // SIGKILL to the pid namespace's init: the kernel kills every process in it, and the
        // init's pidfd turns readable only after the last of them is gone.
        ::syscall(SYS_pidfd_send_signal, sandbox_init_pidfd.get(), SIGKILL, nullptr, 0);
        pollfd gone{sandbox_init_pidfd.get(), POLLIN, 0};
        while (::poll(&gone, 1, 10000) < 0 && errno == EINTR) {
        }
      }
      child->Signal(SIGKILL).IgnoreError();  // --die-with-parent takes the sandbox with it
      auto st = child->Wait();
      bwrap_status = st.ok() ? *st : ExitStatus::Killed(SIGKILL);
      break;
    }
    if (status_open && (fds[1].revents & (POLLIN | POLLHUP))) {
      char buf[256];
      ssize_t n = ::read(status_pipe->read.get(), buf, sizeof(buf));
      if (n > 0) {
        status_text.append(buf, static_cast<size_t>(n));
        if (status_text.find("started\n") != std::string::npos) mount_lock->Release();
      } else if (n == 0 || errno != EINTR) {
        status_open = false;
      }
    }
    if (info_open && (fds[2].revents & (POLLIN | POLLHUP))) {
      char buf[512];
      ssize_t n = ::read(info_pipe->read.get(), buf, sizeof(buf));
      if (n > 0) {
        info.append(buf, static_cast<size_t>(n));
        size_t at = info.find("\"child-pid\":");
        if (at != std::string::npos && !sandbox_init_pidfd && info.find('}') != std::string::npos) {
          int pid = std::atoi(info.c_str() + at + 12);
          if (pid > 0) sandbox_init_pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
        }
      } else if (n == 0 || errno != EINTR) {
        info_open = false;
      }
    }
    if (fds[0].revents & POLLIN) {
      auto st = child->Wait();
      if (!st.ok()) return RunOutcome::Aborted(st.status().message());
      bwrap_status = *st;
    }
  }

  mount_lock->Release();
  // Every writer of the status pipe is gone: the sandbox died with bubblewrap.
  ::fcntl(status_pipe->read.get(), F_SETFL, O_NONBLOCK);
  if (auto rest = ReadAll(status_pipe->read.get()); rest.ok()) status_text += *rest;
  if (timed_out) return TimedOut(r.spec);
  if (auto parsed = ParseInitStatus(status_text, r.spec.argv[0])) return *parsed;
  if (status_text.find("started\n") != std::string::npos) {
    // The command ran, but its init never reported how it ended: killed from inside.
    RunOutcome died = RunOutcome::Signaled(bwrap_status->signaled ? bwrap_status->signal : SIGKILL);
    died.reason = fmt::format("the sandbox's init died before reporting (bubblewrap {})",
                           bwrap_status->ToString());
    return died;
  }
  return RunOutcome::Aborted(fmt::format(
      "sandbox setup failed: bubblewrap {} before the command started (its message is on the "
      "run's stderr)",
      bwrap_status->ToString()));
}

// Unconfined: no bubblewrap. Severed by a network namespace of our own, or shared.
RunOutcome LaunchUnconfined(const LaunchRequest& r, FilteredEgressNetns* net) {
  SpawnOptions o;
  o.argv = r.spec.argv;
  o.env = SandboxEnvironment(r.spec.env);
  o.cwd = r.spec.workspace;
  o.new_session = true;  // its own process group, so the timeout can kill the whole tree
  o.fds = {{r.stdout_fd, 1}, {r.stderr_fd, 2}};
  // Nothing confines an unconfined run; at least it holds no capability (a root run could
  // otherwise rewrite its own firewall).
  o.drop_capabilities = true;
  if (net) {
    o.netns_fd = net->netns_fd();
    o.bind_files = {{net->resolv_conf_path(), "/etc/resolv.conf"}};
  }
  if (r.decision.plan == Plan::kSevered) {
    // A plain netns needs CAP_SYS_ADMIN; without it, a user namespace of our own may still
    // allow one. If neither can be made, the run is aborted: never run on our network.
    o.unshare_attempts = {CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWNET};
    o.loopback_up = true;
  }
  auto child = Spawn(o);
  if (!child.ok()) {
    const std::string m = child.status().message();
    if (m.rfind("execve(", 0) == 0) {
      RunOutcome out;
      out.kind = child.status().code() == StatusCode::kNotFound ? RunOutcome::Kind::kNotFound
                                                                : RunOutcome::Kind::kCannotInvoke;
      out.reason = fmt::format("cannot run {}: {}", r.spec.argv[0], m);
      return out;
    }
    if (net) return RunOutcome::Aborted(fmt::format("Filtered-egress netns setup failed: enter namespace: {}", m));
    return RunOutcome::Aborted(fmt::format("Severed-egress namespace setup failed: {}", m));
  }
  auto deadline = Deadline(r.spec);
  for (;;) {
    auto st = child->WaitFor(Remaining(deadline));
    if (!st.ok()) return RunOutcome::Aborted(st.status().message());
    if (st->has_value()) {
      const ExitStatus& e = **st;
      return e.signaled ? RunOutcome::Signaled(e.signal) : RunOutcome::Exited(e.code);
    }
    // Timeout: the process group (unconfined runs have no pid namespace to kill whole).
    ::kill(-child->pid(), SIGKILL);
    child->Signal(SIGKILL).IgnoreError();
    child->Wait().status().IgnoreError();
    return TimedOut(r.spec);
  }
}

}  // namespace

RunOutcome LaunchAndWait(const LaunchRequest& r) {
  if (r.spec.argv.empty()) return RunOutcome::Aborted("the run has no command");
  if (r.decision.plan == Plan::kRefused) return RunOutcome::Aborted("refused: " + r.decision.reason);
  if (r.decision.confined && (r.bwrap_path.empty() || r.init_path.empty())) {
    return RunOutcome::Aborted("sandbox setup failed: bubblewrap or codespace-init not found");
  }
  if (r.decision.plan != Plan::kFiltered) {
    return r.decision.confined ? LaunchConfined(r, nullptr) : LaunchUnconfined(r, nullptr);
  }
  // Filtered: the run's namespace, firewall and DNS gate first; any failure aborts the run
  // before its command starts (fail closed: never launched with the worker's network).
  FilteredNetnsConfig c;
  c.run_id = r.run_id;
  c.namespace_name = r.namespace_name;
  c.allowlist = r.spec.egress.allowlist;
  c.pool = r.pool;
  c.upstream_dns = r.upstream_dns;
  c.before_step = r.before_setup_step;
  c.on_refused = [id = r.run_id](std::string_view name) {
    std::fprintf(stderr, "codespace: run %s: DNS gate refused \"%.*s\"\n", id.c_str(),
                 static_cast<int>(name.size()), name.data());
  };
  if (c.namespace_name.empty()) {
    return RunOutcome::Aborted("Filtered-egress netns setup failed: create namespace: no namespace "
                               "name was admitted for this run");
  }
  auto net = FilteredEgressNetns::Setup(std::move(c));
  if (!net.ok()) return RunOutcome::Aborted(net.status().message());
  RunOutcome o = r.decision.confined ? LaunchConfined(r, net->get()) : LaunchUnconfined(r, net->get());
  Status down = (*net)->Teardown();
  o.network_report = (*net)->Report();
  if (!down.ok()) std::fprintf(stderr, "codespace: run %s: %s\n", r.run_id.c_str(), down.message().c_str());
  return o;
}

std::string FindSandboxInit() {
  std::string env = GetEnv("CODESPACE_INIT_PATH");
  if (!env.empty()) return env;
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  std::string dir(self);
  dir = dir.substr(0, dir.find_last_of('/'));
  for (const std::string& candidate :
       {dir + "/codespace-init", dir + "/../libexec/codespace/codespace-init"}) {
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace codespace
