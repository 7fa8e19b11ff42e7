// SandboxEgressPolicy and the allowlist: what network a run may reach.
//
// Pure values and parsing; nothing here touches the host.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace codespace {

enum class SandboxEgressPolicy {
  kNone,       // no egress at all
  kAllowlist,  // only the listed destinations
  kOpen,       // the worker's own network
};

std::string_view EgressPolicyName(SandboxEgressPolicy policy);  // "none" | "allowlist" | "open"
Result<SandboxEgressPolicy> ParseEgressPolicy(std::string_view text);

// One allowlist destination, as SPEC lists them:
//   api.anthropic.com            a host name, every port
//   *.githubusercontent.com      any name strictly below the suffix, every port
//   example.com:443              a name with a port
//   203.0.113.7  203.0.113.0/24  IPv4 address or CIDR, optionally :port
//   2001:db8::1  2001:db8::/32   IPv6 address or CIDR (bare: no port possible)
//   [2001:db8::1]:8443  [2001:db8::/32]:443   bracketed IPv6, with a port
struct AllowlistEntry {
  enum class Kind { kHostName, kWildcardHostName, kAddress, kCidr };

  Kind kind = Kind::kHostName;
  // kHostName: the lower-cased name, no trailing dot. kWildcardHostName: the suffix after "*."
  // (lower-cased). kAddress/kCidr: the canonical address text (inet_ntop form, network address
  // for a CIDR, host bits cleared).
  std::string host;
  int family = 0;                    // AF_INET or AF_INET6 for kAddress/kCidr; 0 for names
  std::array<uint8_t, 16> bytes{};   // network-order address (first 4 bytes for IPv4)
  int prefix_length = 0;             // 32/128 for kAddress; the prefix for kCidr
  std::optional<uint16_t> port;      // nullopt: every port

  bool is_name() const { return kind == Kind::kHostName || kind == Kind::kWildcardHostName; }
  // Canonical text that ParseAllowlistEntry parses back to an equal entry.
  std::string ToString() const;
  // True when DNS name `name` (any case, optional trailing dot) is covered by this name entry.
  // "*.example.com" covers "a.example.com" and "a.b.example.com", not "example.com".
  bool MatchesName(std::string_view name) const;
  // True when the address (family, network-order bytes) is inside this address/CIDR entry.
  bool ContainsAddress(int address_family, const uint8_t* address_bytes) const;

  friend bool operator==(const AllowlistEntry&, const AllowlistEntry&) = default;
};

// Parses one entry. Errors name the entry and what is wrong, e.g.
//   allowlist entry "exa mple.com": invalid host name
//   allowlist entry "example.com:70000": port out of range (1-65535)
//   allowlist entry "10.0.0.0/33": CIDR prefix out of range (0-32)
Result<AllowlistEntry> ParseAllowlistEntry(std::string_view text);

// A run's whole egress policy. The allowlist is empty unless the mode is kAllowlist.
struct EgressPolicy {
  SandboxEgressPolicy mode = SandboxEgressPolicy::kNone;
  std::vector<AllowlistEntry> allowlist;

  friend bool operator==(const EgressPolicy&, const EgressPolicy&) = default;
};

// Validates a mode with its entries: every entry must parse; the allowlist mode needs at least
// one entry ("the allowlist policy needs at least one --allow entry"); the other modes take none.
Result<EgressPolicy> MakeEgressPolicy(SandboxEgressPolicy mode,
                                      const std::vector<std::string>& entries);

}  // namespace codespace
