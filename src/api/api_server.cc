#include "api/api_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/file_util.h"

namespace codespace::api {
namespace {

std::string EnvOr(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string(fallback);
}

Result<gid_t> ResolveGroup(const std::string& group) {
  if (!group.empty() && group.find_first_not_of("0123456789") == std::string::npos) {
    return static_cast<gid_t>(std::stoul(group));
  }
  std::vector<char> buf(16384);
  struct group gr {};
  struct group* found = nullptr;
  int rc = ::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found);
  if (rc != 0) return ErrnoError(fmt::format("getgrnam_r({})", group), rc);
  if (found == nullptr)
    return NotFoundError(fmt::format("CODESPACE_API_GROUP: no group \"{}\"", group));
  return found->gr_gid;
}

Result<UniqueFd> ListenUnix(const std::string& path, const std::string& group) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return InvalidArgumentError(fmt::format("API socket path {} is too long", path));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("socket(AF_UNIX)", errno);
  // A socket file left by a dead worker is removed; one a live worker answers on is not.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return FailedPreconditionError(fmt::format("{} exists and is not a socket", path));
    }
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      return FailedPreconditionError(
          fmt::format("{}: another worker is serving the API on this state dir", path));
    }
    ::unlink(path.c_str());
  }
  // Bound with a umask that leaves no window in which the socket is wider than 0660.
  mode_t old = ::umask(0117);
  int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  ::umask(old);
  if (rc != 0) return ErrnoError(fmt::format("bind({})", path), err);
  if (!group.empty()) {
    ASSIGN_OR_RETURN(gid_t gid, ResolveGroup(group));
    if (::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
      return ErrnoError(fmt::format("chown({}, -1, {})", path, gid), errno);
    }
  }
  if (::chmod(path.c_str(), 0660) != 0)
    return ErrnoError(fmt::format("chmod({}, 0660)", path), errno);
  if (::listen(fd.get(), 512) != 0) return ErrnoError(fmt::format("listen({})", path), errno);
  return fd;
}

Result<UniqueFd> ListenTcp(const std::string& listen, int* port_out) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgumentError(
        fmt::format("CODESPACE_API_LISTEN \"{}\": expected HOST:PORT", listen));
  }
  std::string host = listen.substr(0, colon);
  std::string port_text = listen.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port_text) > 65535) {
    return InvalidArgumentError(fmt::format("CODESPACE_API_LISTEN \"{}\": bad port", listen));
  }
  uint16_t port = static_cast<uint16_t>(std::stoul(port_text));
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family = AF_INET;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    family = AF_INET6;
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    if (::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6->sin6_addr) != 1) {
      return InvalidArgumentError(fmt::format("CODESPACE_API_LISTEN \"{}\": bad address", listen));
    }
    len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    if (::inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1) {
      return InvalidArgumentError(fmt::format("CODESPACE_API_LISTEN \"{}\": bad address", listen));
    }
    len = sizeof(sockaddr_in);
  }
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("socket(AF_INET)", errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    return ErrnoError(fmt::format("bind({})", listen), errno);
  }
  if (::listen(fd.get(), 512) != 0) return ErrnoError(fmt::format("listen({})", listen), errno);
  sockaddr_storage bound{};
  socklen_t blen = sizeof(bound);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &blen);
  *port_out = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

class SocketWriter : public ResponseWriter {
 public:
  explicit SocketWriter(int fd) : fd_(fd) {}
  bool Write(std::string_view bytes) override {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

 private:
  int fd_;
};

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  // Always walks the expected length (b), so the time does not depend on where a differs.
  for (size_t i = 0; i < b.size(); ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ static_cast<unsigned char>(b[i])));
  }
  return diff == 0;
}

std::string ApiSocketPath(const std::string& state_dir) {
  std::string custom = EnvOr("CODESPACE_API_SOCKET");
  return custom.empty() ? state_dir + "/api.sock" : custom;
}

Result<ApiServerConfig> ApiServerConfigFromEnvironment(const std::string& state_dir) {
  ApiServerConfig c;
  c.unix_path = ApiSocketPath(state_dir);
  c.socket_dir_for_group = !EnvOr("CODESPACE_API_SOCKET").empty();
  c.unix_group = EnvOr("CODESPACE_API_GROUP");
  c.tcp_listen = EnvOr("CODESPACE_API_LISTEN");
  std::string token_file = EnvOr("CODESPACE_API_TOKEN_FILE");
  if (!c.tcp_listen.empty()) {
    if (token_file.empty()) {
      return FailedPreconditionError(
          "CODESPACE_API_LISTEN is set but CODESPACE_API_TOKEN_FILE is not: the TCP API needs a "
          "bearer token and will not start without one");
    }
    auto fd = OpenFile(token_file.c_str(), O_RDONLY);
    if (!fd.ok()) return fd.status().WithContext("CODESPACE_API_TOKEN_FILE");
    ASSIGN_OR_RETURN(std::string text, ReadAll(fd->get()));
    c.token = text.substr(0, text.find('\n'));
    while (!c.token.empty() && (c.token.back() == '\r' || c.token.back() == ' '))
      c.token.pop_back();
    if (c.token.size() < 16) {
      return FailedPreconditionError(fmt::format(
          "CODESPACE_API_TOKEN_FILE {}: the token must be at least 16 characters", token_file));
    }
  }
  return c;
}

Result<std::unique_ptr<ApiServer>> ApiServer::Start(ApiServerConfig config,
                                                    std::unique_ptr<ApiHandler> handler) {
  if (!config.tcp_listen.empty() && config.token.empty()) {
    return FailedPreconditionError("the TCP API will not start without a bearer token");
  }
  std::unique_ptr<ApiServer> s(new ApiServer());
  s->config_ = std::move(config);
  s->handler_ = std::move(handler);
  if (!s->config_.unix_path.empty()) {
    if (s->config_.socket_dir_for_group) {
      // A socket outside the state dir: its own directory, 0750, of the socket's group, so the
      // group can reach it and nobody else can.
      std::string dir = s->config_.unix_path.substr(0, s->config_.unix_path.find_last_of('/'));
      RETURN_IF_ERROR(MakeDirs(dir, 0750));
      if (::chmod(dir.c_str(), 0750) != 0) return ErrnoError(fmt::format("chmod({})", dir), errno);
      if (!s->config_.unix_group.empty()) {
        ASSIGN_OR_RETURN(gid_t gid, ResolveGroup(s->config_.unix_group));
        if (::chown(dir.c_str(), static_cast<uid_t>(-1), gid) != 0) {
          return ErrnoError(fmt::format("chown({}, :{})", dir, gid), errno);
        }
      }
    }
    ASSIGN_OR_RETURN(s->unix_listener_, ListenUnix(s->config_.unix_path, s->config_.unix_group));
  }
  if (!s->config_.tcp_listen.empty()) {
    ASSIGN_OR_RETURN(s->tcp_listener_, ListenTcp(s->config_.tcp_listen, &s->tcp_port_));
  }
  ASSIGN_OR_RETURN(s->wake_, MakePipe(O_NONBLOCK));
  s->accept_thread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

ApiServer::~ApiServer() { Stop(); }

void ApiServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stop_.store(true);
  char c = 'x';
  WriteAll(wake_.write.get(), &c, 1).IgnoreError();
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::unique_ptr<Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& conn : connections_) ::shutdown(conn->fd.get(), SHUT_RDWR);
    conns.swap(connections_);
  }
  for (auto& conn : conns) {
    if (conn->thread.joinable()) conn->thread.join();
  }
  if (unix_listener_) ::unlink(config_.unix_path.c_str());
  unix_listener_.reset();
  tcp_listener_.reset();
}

void ApiServer::AcceptLoop() {
  while (!stop_.load()) {
    std::vector<pollfd> fds;
    fds.push_back({wake_.read.get(), POLLIN, 0});
    if (unix_listener_) fds.push_back({unix_listener_.get(), POLLIN, 0});
    if (tcp_listener_) fds.push_back({tcp_listener_.get(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), 1000);
    // Threads of finished connections are joined here, so their number stays bounded.
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = connections_.begin(); it != connections_.end();) {
        if ((*it)->done.load()) {
          (*it)->thread.join();
          it = connections_.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (rc <= 0) continue;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      bool tcp = fds[i].fd == tcp_listener_.get();
      UniqueFd conn_fd(::accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn_fd) continue;
      timeval tv{30, 0};
      ::setsockopt(conn_fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      std::lock_guard<std::mutex> lock(mu_);
      if (connections_.size() >= config_.max_connections) {
        SocketWriter w(conn_fd.get());
        w.Write(SerializeResponse(ErrorResponse(503, "too many connections"), false));
        continue;
      }
      auto conn = std::make_unique<Connection>();
      conn->fd = std::move(conn_fd);
      Connection* raw = conn.get();
      raw->thread = std::thread([this, raw, tcp] {
        Serve(raw->fd.get(), tcp);
        ::shutdown(raw->fd.get(), SHUT_RDWR);
        raw->done.store(true);
      });
      connections_.push_back(std::move(conn));
    }
  }
}

void ApiServer::Serve(int fd, bool tcp) {
  SocketWriter out(fd);
  std::string buffer;
  char chunk[16384];
  auto idle_since = std::chrono::steady_clock::now();
  // A request must arrive whole within the idle timeout of its first byte, so a client that
  // trickles a byte at a time cannot hold a connection slot for ever.
  auto request_started = idle_since;
  while (!stop_.load()) {
    HttpRequest req;
    ParseResult parsed = ParseRequest(buffer, config_.limits, &req);
    if (parsed.state == ParseState::kError) {
      out.Write(SerializeResponse(ErrorResponse(parsed.status, parsed.error), false));
      return;
    }
    if (parsed.state == ParseState::kIncomplete) {
      pollfd p{fd, POLLIN, 0};
      int rc = ::poll(&p, 1, 250);
      if (rc < 0 && errno != EINTR) return;
      auto now = std::chrono::steady_clock::now();
      if (!buffer.empty() && now - request_started > config_.idle_timeout) {
        out.Write(SerializeResponse(ErrorResponse(408, "request timed out"), false));
        return;
      }
      if (rc <= 0) {
        if (now - idle_since > config_.idle_timeout) {
          if (!buffer.empty()) {
            out.Write(SerializeResponse(ErrorResponse(408, "request timed out"), false));
          }
          return;
        }
        continue;
      }
      ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the client closed (or reset): nothing to answer
      if (buffer.empty()) request_started = std::chrono::steady_clock::now();
      buffer.append(chunk, static_cast<size_t>(n));
      idle_since = std::chrono::steady_clock::now();
      continue;
    }
    buffer.erase(0, parsed.consumed);
    if (tcp) {
      std::string auth = req.Header("authorization");
      constexpr std::string_view kBearer = "Bearer ";
      bool ok = auth.size() > kBearer.size() && auth.compare(0, kBearer.size(), kBearer) == 0 &&
                ConstantTimeEquals(std::string_view(auth).substr(kBearer.size()), config_.token);
      if (!ok) {
        HttpResponse r = ErrorResponse(
            401, auth.empty() ? "missing bearer token" : "wrong bearer token", "Authorization");
        r.headers.emplace_back("WWW-Authenticate", "Bearer");
        if (!out.Write(SerializeResponse(r, req.keep_alive)) || !req.keep_alive) return;
        continue;
      }
    }
    if (!handler_->Handle(req, out, stop_)) return;
    idle_since = std::chrono::steady_clock::now();
  }
}

}  // namespace codespace::api
