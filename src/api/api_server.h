// ApiServer: serves an ApiHandler over HTTP/1.1 on the worker's unix socket and, optionally, a
// TCP address.
//
// - Unix socket: <state dir>/api.sock, mode 0660, group CODESPACE_API_GROUP (a name or gid) when
//   set. Who may connect is decided by the file's permissions: no token is asked.
// - TCP (CODESPACE_API_LISTEN=HOST:PORT, e.g. 127.0.0.1:8686): every request must carry
//   "Authorization: Bearer <token>", the token read from CODESPACE_API_TOKEN_FILE at start and
//   compared in constant time. TCP without a token file refuses to start.
// - One thread per connection, at most `max_connections` at once (more are answered 503 and
//   closed); keep-alive, an idle timeout, Content-Length bodies up to the HttpLimits.
// Stop() (and the destructor) closes the listeners, cuts every connection (streams included) and
// joins all threads; the socket file is removed.
#pragma once

#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "api/api_handler.h"
#include "api/http.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace codespace::api {

struct ApiServerConfig {
  std::string unix_path;   // empty: no unix socket
  std::string unix_group;  // empty: the worker's own group
  bool socket_dir_for_group = false;  // make the socket's directory 0750 of unix_group
  std::string tcp_listen;  // "IPv4:PORT" or "[IPv6]:PORT"; empty: no TCP
  std::string token;       // required with tcp_listen
  size_t max_connections = 256;
  std::chrono::milliseconds idle_timeout{30000};
  HttpLimits limits;
};

// Where the worker's unix socket is: CODESPACE_API_SOCKET when set, else <state_dir>/api.sock.
// The state dir is 0700 (records and logs), so a socket meant for a group lives elsewhere:
// CODESPACE_API_SOCKET=/run/codespace-api/api.sock with CODESPACE_API_GROUP gets a 0750
// directory of that group around it.
std::string ApiSocketPath(const std::string& state_dir);

// From the environment: unix socket at ApiSocketPath(state_dir); CODESPACE_API_GROUP,
// CODESPACE_API_LISTEN, CODESPACE_API_TOKEN_FILE (the token is the file's first line).
Result<ApiServerConfig> ApiServerConfigFromEnvironment(const std::string& state_dir);

// Constant-time comparison (for the bearer token): the time depends on the lengths only.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

class ApiServer {
 public:
  static Result<std::unique_ptr<ApiServer>> Start(ApiServerConfig config,
                                                  std::unique_ptr<ApiHandler> handler);
  ~ApiServer();
  void Stop();
  // The bound TCP port (after Start with a port of 0), or 0.
  int tcp_port() const { return tcp_port_; }

 private:
  ApiServer() = default;
  void AcceptLoop();
  void Serve(int fd, bool tcp);

  struct Connection {
    UniqueFd fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  ApiServerConfig config_;
  std::unique_ptr<ApiHandler> handler_;
  UniqueFd unix_listener_, tcp_listener_;
  Pipe wake_;
  int tcp_port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::list<std::unique_ptr<Connection>> connections_;
  bool stopped_ = false;
};

}  // namespace codespace::api
