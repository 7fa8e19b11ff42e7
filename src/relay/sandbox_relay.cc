#include "relay/sandbox_relay.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "relay/relay.h"

namespace codespace {

namespace {

void ResetSignals() {
  // Handlers installed by the init (which forwards SIGTERM & co. to its command) survive fork:
  // back to the defaults, so that SIGTERM ends this process.
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::sigaction(sig, &sa, nullptr);  // fails harmlessly for the signals that cannot be caught
  }
  sa.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Everything but stdio and the ready pipe: the init's status pipe and whatever else it holds
// must close when their owners are done, not when the relay dies.
void CloseInheritedDescriptors(int keep) {
  if (keep < 3) {
    ::close_range(3, UINT_MAX, 0);
    return;
  }
  if (keep > 3) ::close_range(3, static_cast<unsigned>(keep) - 1, 0);
  ::close_range(static_cast<unsigned>(keep) + 1, UINT_MAX, 0);
}

void RaiseDescriptorLimit() {
  // Six descriptors per connection (two sockets, two pipes): 1024 would cap us near 170.
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

int Fail(UniqueFd& ready, const Status& s) {
  std::string line = "error: " + s.ToString() + "\n";
  ::fprintf(stderr, "codespace broker relay: %s", line.c_str() + 7);
  if (ready) WriteAll(ready.get(), line).IgnoreError();
  ready.reset();
  return 1;
}

}  // namespace

int RunSandboxRelay(uint16_t port, const std::string& socket_path, int ready_fd) {
  // Die with the init, whatever killed it. (If the init is already gone, the sandbox's pid
  // namespace is being torn down and this process with it.)
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ResetSignals();
  CloseInheritedDescriptors(ready_fd);
  UniqueFd ready(ready_fd);
  if (ready) ::fcntl(ready.get(), F_SETFD, FD_CLOEXEC);
  RaiseDescriptorLimit();

  std::vector<UniqueFd> listeners;
  auto v4 = ListenLoopbackTcp("127.0.0.1", port);
  if (!v4.ok()) return Fail(ready, v4.status());
  auto bound = LocalPort(v4->get());
  if (!bound.ok()) return Fail(ready, bound.status());
  listeners.push_back(std::move(*v4));
  // Best effort: a namespace without IPv6 (or with it disabled) has no [::1].
  auto v6 = ListenLoopbackTcp("::1", *bound);
  if (v6.ok()) listeners.push_back(std::move(*v6));
  auto relay = Relay::Create(std::move(listeners), BrokerAddress::Unix(socket_path));
  if (!relay.ok()) return Fail(ready, relay.status());

  if (ready) {
    std::string report = port == 0 ? "R" + std::to_string(*bound) + "\n" : "R";
    Status wrote = WriteAll(ready.get(), report);
    ready.reset();
    if (!wrote.ok()) return 1;  // the init is gone; PR_SET_PDEATHSIG may not have fired yet
  }
  auto devnull = OpenFile("/dev/null", O_RDWR);
  if (devnull.ok()) {
    for (int fd = 0; fd <= 2; ++fd) ::dup2(devnull->get(), fd);
  }
  Status ran = (*relay)->Run();  // returns only if epoll fails
  return ran.ok() ? 0 : 1;
}

}  // namespace codespace
