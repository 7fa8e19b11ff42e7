// BrokerAddress: where a run's broker is, on the worker's side — part of the run spec, parsed
// and resolved here so that everything that checks a spec (the CLI, the API, admission) reads it
// the same way without linking the relay that later connects to it (relay/relay.h).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace codespace {

// Where a broker is, on the worker's side.
struct BrokerAddress {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string path;   // kUnix: an absolute path
  std::string host;   // kTcp: a loopback address literal, "127.0.0.1" (127.0.0.0/8) or "::1"
  uint16_t port = 0;  // kTcp: 1..65535

  static BrokerAddress Unix(std::string path);
  static BrokerAddress Tcp(std::string host, uint16_t port);

  // The form ParseBrokerAddress reads: "unix:/path", "127.0.0.1:8080", "[::1]:8080".
  std::string ToString() const;
  friend bool operator==(const BrokerAddress&, const BrokerAddress&) = default;
};

// Parses a broker address as the run spec gives it (--broker):
//   "unix:/abs/path"           a unix stream socket (absolute, fits sockaddr_un)
//   "127.0.0.1:PORT"           TCP to an IPv4 loopback address (any of 127.0.0.0/8)
//   "[::1]:PORT"               TCP to the IPv6 loopback address
// A TCP host that is not a loopback literal (a name, "localhost" included, or any other address)
// is refused: a broker is a service on the worker itself, and the relay must not become a way
// out to the network. Ports are decimal 1..65535.
Result<BrokerAddress> ParseBrokerAddress(std::string_view text);

// The socket address a BrokerAddress names, resolved once (no DNS: literals only).
struct BrokerSocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};
Result<BrokerSocketAddress> ResolveBrokerAddress(const BrokerAddress& address);

}  // namespace codespace
