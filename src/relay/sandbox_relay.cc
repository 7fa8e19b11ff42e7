#include "relay/sandbox_relay.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

void RaiseDescriptorLimit() {
  // Six descriptors per connection (two sockets, two pipes): 1024 would cap us near 170.
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

int Fail(UniqueFd& ready, const Status& s) {
  ::fprintf(stderr, "codespace broker relay: %s\n", s.ToString().c_str());
  ready.reset();  // EOF: the init knows the relay is not there
  return 1;
}

}  // namespace

int RunSandboxRelay(uint16_t port, const std::string& socket_path, int ready_fd) {
  UniqueFd ready(ready_fd);
  // Die with the init, whatever killed it. (If the init is already gone, the sandbox's pid
  // namespace is being torn down and this process with it.)
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ResetSignals();
  RaiseDescriptorLimit();
  if (ready) ::fcntl(ready.get(), F_SETFD, FD_CLOEXEC);

  std::vector<UniqueFd> listeners;
  auto v4 = ListenLoopbackTcp("127.0.0.1", port);
  if (!v4.ok()) return Fail(ready, v4.status());
  listeners.push_back(std::move(*v4));
  if (port != 0) {
    // Best effort: a namespace without IPv6 (or with it disabled) has no [::1].
    auto v6 = ListenLoopbackTcp("::1", port);
    if (v6.ok()) listeners.push_back(std::move(*v6));
  }
  auto relay = Relay::Create(std::move(listeners), BrokerAddress::Unix(socket_path));
  if (!relay.ok()) return Fail(ready, relay.status());

  if (ready) {
    char byte = 'R';
    Status wrote = WriteAll(ready.get(), &byte, 1);
    ready.reset();
    if (!wrote.ok()) return Fail(ready, wrote);
  }
  Status ran = (*relay)->Run();  // returns only if epoll fails
  if (!ran.ok()) {
    ::fprintf(stderr, "codespace broker relay: %s\n", ran.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace codespace
