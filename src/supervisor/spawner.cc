#include "supervisor/spawner.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/process.h"

namespace codespace {

namespace {

constexpr char kSpawnerProcessName[] = "cs-spawner";
// A request is SupervisorArgv's arguments, NUL-separated; a reply "ok PID START" or "error TEXT".
constexpr size_t kMaxMessage = 64 * 1024;

std::vector<std::string> SplitNul(const char* data, size_t size) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\0') {
      if (i > start) out.emplace_back(data + start, i - start);
      start = i + 1;
    }
  }
  return out;
}

void Reply(int fd, const std::string& text) {
  // A lost reply (the worker gone) needs no handling: the socket's end stops the loop.
  (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
}

// The spawner's whole life: one request, one supervisor, one reply; the socket's end (the worker
// gone) ends it.
[[noreturn]] void Serve(int fd) {
  ::prctl(PR_SET_NAME, kSpawnerProcessName, 0, 0, 0);
  // Terminal signals meant for the worker (Ctrl-C reaches its whole process group) are the
  // worker's to act on; this process ends when the worker does.
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::sigaction(sig, &ign, nullptr);
  // The supervisors it forks are reaped as they end (no zombies for the worker to judge alive).
  ::sigaction(SIGCHLD, &ign, nullptr);
  std::vector<char> buf(kMaxMessage);
  for (;;) {
    ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(0);
    auto args = ParseSupervisorArgs(SplitNul(buf.data(), static_cast<size_t>(n)));
    if (!args.ok()) {
      Reply(fd, "error " + args.status().message());
      continue;
    }
    // The supervisor must not keep this socket: ForkSupervisor's child closes every descriptor
    // above the standard streams.
    auto id = ForkSupervisor(*args, nullptr);
    Reply(fd, id.ok() ? fmt::format("ok {} {}", id->pid, id->start_time)
                      : "error " + id.status().message());
  }
}

}  // namespace

Result<std::unique_ptr<SupervisorSpawner>> SupervisorSpawner::Start() {
  RETURN_IF_ERROR(RequireOneThread("SupervisorSpawner"));
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return ErrnoError("socketpair(spawner)", errno);
  }
  UniqueFd ours(sv[0]), theirs(sv[1]);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork(spawner)", errno);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) ::_exit(0);  // the worker died before the prctl
    ours.reset();
    Serve(theirs.get());
  }
  theirs.reset();
  return std::unique_ptr<SupervisorSpawner>(new SupervisorSpawner(pid, std::move(ours)));
}

SupervisorSpawner::~SupervisorSpawner() {
  socket_.reset();  // its recv ends: it exits
  int st = 0;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
}

Result<ProcessIdentity> SupervisorSpawner::Spawn(const SupervisorArgs& a) {
  std::vector<std::string> argv = SupervisorArgv("-", a);
  std::string request;
  for (size_t i = 2; i < argv.size(); ++i) {  // past the binary and "__supervise"
    request += argv[i];
    request += '\0';
  }
  if (request.size() > kMaxMessage) return InvalidArgumentError("spawner: request too long");
  std::lock_guard lock(mu_);
  ssize_t sent;
  do {
    sent = ::send(socket_.get(), request.data(), request.size(), MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(request.size())) {
    return ErrnoError("send(spawner)", sent < 0 ? errno : EPIPE);
  }
  char reply[4096];
  ssize_t n;
  do {
    n = ::recv(socket_.get(), reply, sizeof(reply) - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    return n == 0 ? UnavailableError("spawner: gone") : ErrnoError("recv(spawner)", errno);
  }
  std::string text(reply, static_cast<size_t>(n));
  if (text.rfind("ok ", 0) != 0) {
    return InternalError(
        fmt::format("spawner: {}", text.rfind("error ", 0) == 0 ? text.substr(6) : text));
  }
  ProcessIdentity id;
  char* end = nullptr;
  id.pid = static_cast<pid_t>(std::strtol(text.c_str() + 3, &end, 10));
  id.start_time = std::strtoull(end, nullptr, 10);
  if (id.pid <= 0) return InternalError(fmt::format("spawner: bad reply \"{}\"", text));
  return id;
}

}  // namespace codespace
