#include "api/api_client.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace codespace::api {
namespace {

class Reader {
 public:
  explicit Reader(int fd) : fd_(fd) {}
  // Ensures at least `n` buffered bytes; false at EOF or error.
  bool Fill(size_t n) {
    while (buf_.size() < n) {
      char tmp[16384];
      ssize_t r = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      buf_.append(tmp, static_cast<size_t>(r));
    }
    return true;
  }
  // A line ending in CRLF (without it); false at EOF.
  bool Line(std::string* line) {
    for (;;) {
      size_t eol = buf_.find("\r\n");
      if (eol != std::string::npos) {
        *line = buf_.substr(0, eol);
        buf_.erase(0, eol + 2);
        return true;
      }
      if (buf_.size() > 65536 || !Fill(buf_.size() + 1)) return false;
    }
  }
  std::string Take(size_t n) {
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }
  // Whatever arrives until EOF, piecewise.
  bool Drain(const std::function<bool(std::string_view)>& sink) {
    if (!buf_.empty() && !sink(Take(buf_.size()))) return true;
    for (;;) {
      char tmp[16384];
      ssize_t r = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return true;
      if (!sink(std::string_view(tmp, static_cast<size_t>(r)))) return true;
    }
  }

 private:
  int fd_;
  std::string buf_;
};

}  // namespace

Result<UniqueFd> ConnectTo(const std::string& address) {
  if (address.rfind("unix:", 0) == 0) {
    std::string path = address.substr(5);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) return InvalidArgumentError("socket path too long");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return ErrnoError("socket(AF_UNIX)", errno);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return ErrnoError(fmt::format("connect({})", path), errno);
    }
    return fd;
  }
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return InvalidArgumentError("expected HOST:PORT");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::atoi(address.c_str() + colon + 1)));
  if (::inet_pton(AF_INET, address.substr(0, colon).c_str(), &a.sin_addr) != 1) {
    return InvalidArgumentError(fmt::format("bad address {}", address));
  }
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("socket(AF_INET)", errno);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return ErrnoError(fmt::format("connect({})", address), errno);
  }
  return fd;
}

Result<ClientResponse> CallApiOn(int fd, std::string_view method, std::string_view target,
                                 std::string_view body,
                                 const std::map<std::string, std::string>& headers,
                                 const std::function<bool(std::string_view)>& on_body) {
  std::string req = fmt::format("{} {} HTTP/1.1\r\nHost: codespace\r\n", method, target);
  for (const auto& [k, v] : headers) req += fmt::format("{}: {}\r\n", k, v);
  bool has_type = false;
  for (const auto& [k, v] : headers) {
    std::string lower = k;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    has_type = has_type || lower == "content-type";
  }
  if (!body.empty() || method == "POST") {
    if (!has_type) req += "Content-Type: application/json\r\n";
    req += fmt::format("Content-Length: {}\r\n", body.size());
  }
  req += "\r\n";
  req += body;
  // MSG_NOSIGNAL: a server that answers early (413) and closes must not kill us with SIGPIPE;
  // its answer is still read below.
  for (std::string_view rest = req; !rest.empty();) {
    ssize_t n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    rest.remove_prefix(static_cast<size_t>(n));
  }
  Reader in(fd);
  ClientResponse resp;
  std::string line;
  if (!in.Line(&line)) return UnavailableError("the API closed the connection before answering");
  if (line.size() < 12 || line.compare(0, 5, "HTTP/") != 0) {
    return InternalError(fmt::format("malformed status line \"{}\"", line));
  }
  resp.status = std::atoi(line.c_str() + 9);
  while (in.Line(&line) && !line.empty()) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t v = line.find_first_not_of(' ', colon + 1);
    resp.headers[key] = v == std::string::npos ? "" : line.substr(v);
  }
  auto sink = [&](std::string_view data) {
    if (on_body && resp.status >= 200 && resp.status < 300) return on_body(data);
    resp.body.append(data);
    return true;
  };
  if (resp.headers["transfer-encoding"] == "chunked") {
    for (;;) {
      if (!in.Line(&line)) return UnavailableError("the chunked body was cut");
      size_t size = std::strtoul(line.c_str(), nullptr, 16);
      if (size == 0) {
        in.Line(&line);  // the CRLF after the last chunk
        break;
      }
      if (!in.Fill(size + 2)) return UnavailableError("the chunked body was cut");
      std::string data = in.Take(size);
      in.Take(2);
      if (!sink(data)) break;
    }
  } else if (resp.headers.count("content-length")) {
    size_t n = std::strtoul(resp.headers["content-length"].c_str(), nullptr, 10);
    if (!in.Fill(n)) return UnavailableError("the body was cut");
    sink(in.Take(n));
  } else {
    in.Drain(sink);
  }
  return resp;
}

Result<ClientResponse> CallApi(const std::string& address, std::string_view method,
                               std::string_view target, std::string_view body,
                               const std::map<std::string, std::string>& headers,
                               const std::function<bool(std::string_view)>& on_body) {
  ASSIGN_OR_RETURN(UniqueFd fd, ConnectTo(address));
  auto h = headers;
  h["Connection"] = "close";
  return CallApiOn(fd.get(), method, target, body, h, on_body);
}

bool LogFrameDecoder::Feed(std::string_view bytes,
                           const std::function<void(std::string_view, std::string_view)>& sink) {
  pending_.append(bytes);
  for (;;) {
    size_t nl = pending_.find('\n');
    if (nl == std::string::npos) return pending_.size() < 64;
    size_t sp = pending_.find(' ');
    if (sp == std::string::npos || sp > nl) return false;
    std::string tag = pending_.substr(0, sp);
    size_t len = std::strtoul(pending_.c_str() + sp + 1, nullptr, 10);
    if (pending_.size() < nl + 1 + len) return true;
    sink(tag, std::string_view(pending_).substr(nl + 1, len));
    pending_.erase(0, nl + 1 + len);
  }
}

}  // namespace codespace::api
