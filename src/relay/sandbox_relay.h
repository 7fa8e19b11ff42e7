// The in-sandbox half of a run's broker relay, started by codespace-init before the command.
//
// It listens on 127.0.0.1:<port> (and [::1]:<port> where IPv6 is up) inside the run's own network
// namespace — severed, filtered or shared — and forwards each connection to the unix socket that
// the worker's BrokerBridge serves and the launcher bind-mounts into the sandbox. It counts
// nothing that matters (the run could tamper with it): the bridge does.
//
// Dependencies: src/base and libstdc++ only, so that codespace-init can link it.
#pragma once

#include <cstdint>
#include <string>

namespace codespace {

// Where the launcher binds the bridge's socket inside the sandbox: in the sandbox's own /dev,
// which no workspace can cover, so the bind creates nothing in a host directory.
inline constexpr const char* kSandboxBrokerSocketPath = "/dev/.codespace-broker.sock";

// Runs the in-sandbox relay in the calling process, meant to be a child that codespace-init
// forks for it (single-threaded, before the command starts):
//   - asks for SIGKILL when its parent dies (PR_SET_PDEATHSIG), resets the signal handlers and
//     mask it inherited (codespace-init forwards SIGTERM to its command; this process must die of
//     it), ignores SIGPIPE, raises its soft descriptor limit to the hard one;
//   - closes every inherited descriptor but 0, 1, 2 and `ready_fd` (the init's status pipe, the
//     run's other pipes: the relay must hold none of them open);
//   - listens on 127.0.0.1:port (required) and [::1]:port (best effort). Port 0: a free port,
//     chosen by the kernel;
//   - reports on `ready_fd`, then closes it, so that the init starts the command only when the
//     relay answers:
//       ready:   the single byte 'R' — followed by the decimal port and '\n' when `port` was 0
//                (so the init can announce it);
//       failure: "error: <reason>\n" (also printed to stderr); then RunSandboxRelay returns 1.
//     An init that reads EOF before any byte knows the relay died before it could say;
//   - once ready, points 0, 1 and 2 at /dev/null (the run's output pipes must close when the
//     run's own writers are done), and serves until killed (SIGTERM, SIGKILL) or its parent dies.
//     It does not return then.
// `ready_fd` < 0: no report.
int RunSandboxRelay(uint16_t port, const std::string& socket_path, int ready_fd);

}  // namespace codespace
