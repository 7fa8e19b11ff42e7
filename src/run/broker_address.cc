#include "run/broker_address.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstring>

namespace codespace {

BrokerAddress BrokerAddress::Unix(std::string path) {
  BrokerAddress a;
  a.kind = Kind::kUnix;
  a.path = std::move(path);
  return a;
}

BrokerAddress BrokerAddress::Tcp(std::string host, uint16_t port) {
  BrokerAddress a;
  a.kind = Kind::kTcp;
  a.host = std::move(host);
  a.port = port;
  return a;
}

std::string BrokerAddress::ToString() const {
  if (kind == Kind::kUnix) return "unix:" + path;
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

namespace {

Result<uint16_t> ParsePort(std::string_view text, std::string_view whole) {
  if (text.empty() || text.size() > 5 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return InvalidArgumentError(
        fmt::format("broker address \"{}\": port \"{}\" is not a number 1..65535", whole, text));
  }
  unsigned value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  if (value < 1 || value > 65535) {
    return InvalidArgumentError(
        fmt::format("broker address \"{}\": port {} is out of range 1..65535", whole, value));
  }
  return static_cast<uint16_t>(value);
}

Status NotLoopback(std::string_view whole, std::string_view host) {
  return InvalidArgumentError(fmt::format(
      "broker address \"{}\": host \"{}\" is not a loopback address (a broker runs on the worker: "
      "use unix:/path, 127.0.0.1:PORT or [::1]:PORT; names are not resolved)",
      whole, host));
}

}  // namespace

Result<BrokerAddress> ParseBrokerAddress(std::string_view text) {
  if (text.empty()) return InvalidArgumentError("broker address is empty");
  if (text.substr(0, 5) == "unix:") {
    std::string_view path = text.substr(5);
    if (path.empty() || path[0] != '/') {
      return InvalidArgumentError(
          fmt::format("broker address \"{}\": a unix socket path must be absolute", text));
    }
    if (path.find('\0') != std::string_view::npos) {
      return InvalidArgumentError("broker address: the unix socket path holds a NUL byte");
    }
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return InvalidArgumentError(
          fmt::format("broker address \"{}\": the unix socket path is longer than {} bytes", text,
                      sizeof(sockaddr_un{}.sun_path) - 1));
    }
    return BrokerAddress::Unix(std::string(path));
  }
  std::string_view host;
  std::string_view port_text;
  if (text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return InvalidArgumentError(
          fmt::format("broker address \"{}\": expected [IPv6]:PORT, e.g. [::1]:8080", text));
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
    in6_addr a6{};
    if (::inet_pton(AF_INET6, std::string(host).c_str(), &a6) != 1) {
      return InvalidArgumentError(
          fmt::format("broker address \"{}\": \"{}\" is not an IPv6 address", text, host));
    }
    if (!IN6_IS_ADDR_LOOPBACK(&a6)) return NotLoopback(text, host);
    ASSIGN_OR_RETURN(uint16_t port, ParsePort(port_text, text));
    return BrokerAddress::Tcp("::1", port);
  }
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return InvalidArgumentError(fmt::format(
        "broker address \"{}\": expected unix:/path, 127.0.0.1:PORT or [::1]:PORT", text));
  }
  host = text.substr(0, colon);
  port_text = text.substr(colon + 1);
  if (host.find(':') != std::string_view::npos) {
    in6_addr a6{};
    if (::inet_pton(AF_INET6, std::string(host).c_str(), &a6) == 1 ||
        ::inet_pton(AF_INET6, std::string(text).c_str(), &a6) == 1) {
      return InvalidArgumentError(fmt::format(
          "broker address \"{}\": an IPv6 address needs brackets, e.g. [::1]:8080", text));
    }
    return InvalidArgumentError(fmt::format(
        "broker address \"{}\": expected unix:/path, 127.0.0.1:PORT or [::1]:PORT", text));
  }
  in_addr a4{};
  if (::inet_pton(AF_INET, std::string(host).c_str(), &a4) != 1) return NotLoopback(text, host);
  if ((ntohl(a4.s_addr) >> 24) != 127) return NotLoopback(text, host);
  ASSIGN_OR_RETURN(uint16_t port, ParsePort(port_text, text));
  char buf[INET_ADDRSTRLEN] = {0};
  ::inet_ntop(AF_INET, &a4, buf, sizeof(buf));
  return BrokerAddress::Tcp(buf, port);
}

Result<BrokerSocketAddress> ResolveBrokerAddress(const BrokerAddress& address) {
  BrokerSocketAddress out;
  if (address.kind == BrokerAddress::Kind::kUnix) {
    auto* un = reinterpret_cast<sockaddr_un*>(&out.storage);
    if (address.path.empty() || address.path.size() >= sizeof(un->sun_path)) {
      return InvalidArgumentError(
          fmt::format("unix socket path \"{}\" is empty or too long", address.path));
    }
    un->sun_family = AF_UNIX;
    std::memcpy(un->sun_path, address.path.data(), address.path.size());
    out.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.path.size() + 1);
    return out;
  }
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (::inet_pton(AF_INET, address.host.c_str(), &v4->sin_addr) == 1) {
    if ((ntohl(v4->sin_addr.s_addr) >> 24) != 127)
      return NotLoopback(address.ToString(), address.host);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(address.port);
    out.length = sizeof(*v4);
  } else if (::inet_pton(AF_INET6, address.host.c_str(), &v6->sin6_addr) == 1) {
    if (!IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) return NotLoopback(address.ToString(), address.host);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(address.port);
    out.length = sizeof(*v6);
  } else {
    return NotLoopback(address.ToString(), address.host);
  }
  if (address.port == 0) return InvalidArgumentError("broker address: port 0");
  return out;
}

}  // namespace codespace
