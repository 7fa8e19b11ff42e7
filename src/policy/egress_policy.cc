#include "policy/egress_policy.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace codespace {

namespace {

// Grammar of one entry, and how its ambiguities are settled:
//
//   entry   = "[" ipv6 [ "/" prefix ] "]" [ ":" port ]
//           / ipv6 [ "/" prefix ]                      ; two or more ':' — never a port
//           / host [ ":" port ]                        ; split at the first ':'
//   host    = ipv4 [ "/" prefix ] / [ "*." ] name [ "." ]
//
// - An entry with two or more ':' outside brackets, whose first group is hex digits only (as
//   IPv6's always is), is a bare IPv6 address or CIDR, and bare IPv6 never carries a port:
//   "2001:db8::1:443" is the address 2001:db8::1:443 on every port, not 2001:db8::1 port 443.
//   Writing an IPv6 port needs brackets, as in URLs (RFC 3986), so the reading never depends on
//   how many groups "::" stands for. Other entries split host from port at the first ':', so
//   "example.com:80:90" fails on its port "80:90".
// - "[2001:db8::1]" (brackets, no port) is that address on every port.
// - Brackets hold IPv6 only: "[1.2.3.4]:80" and "[example.com]:80" are refused rather than
//   guessed at.
// - Text that inet_pton reads as IPv4 is an address, never a name. A name whose last label is
//   all digits is refused: "10.0.0", "256.1.1.1", "1.2.3.4.5", "01.2.3.4" as malformed IPv4
//   addresses, "example.123" as a host name. No real top-level domain is numeric (RFC 3696 §2),
//   and resolvers would read some of these as addresses (inet_aton takes "10.1" and "0x7f.1").
// - "1.2.3.4" and "1.2.3.4/32" cover the same destinations but stay different entries (kAddress
//   and kCidr), so each round-trips through ToString as written.
// - Whitespace is never trimmed: entries come from flags, and " a.com" is a typo to report, not to
//   repair. It fails wherever it lands (host name, port, IPv6 address, text after "]").
// - Ports and prefixes are decimal digits only ("+80", "0x50", " 80" are refused); leading zeros
//   are read as decimal ("080" is port 80), and the canonical form drops them.

constexpr size_t kMaxHostNameLength = 253;
constexpr size_t kMaxLabelLength = 63;

// The entry is quoted with fmt's escaping ({:?}): plain text reads "exa mple.com", and a control
// character arrives escaped ("a.com\n"), so a stray byte in a flag cannot split the one-line error.
Status EntryError(std::string_view entry, std::string_view what) {
  return InvalidArgumentError(fmt::format("allowlist entry {:?}: {}", entry, what));
}

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string AsciiLowerString(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), AsciiLower);
  return out;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsAsciiDigit);
}

// Reads a non-empty string of decimal digits; values above `max` (however many digits) come back
// as max + 1, so the caller reports them as out of range instead of overflowing.
std::optional<unsigned> ParseDecimal(std::string_view s, unsigned max) {
  if (!AllDigits(s)) return std::nullopt;
  unsigned value = 0;
  for (char c : s) {
    value = value * 10 + static_cast<unsigned>(c - '0');
    if (value > max) return max + 1;
  }
  return value;
}

bool IsValidLabel(std::string_view label) {
  if (label.empty() || label.size() > kMaxLabelLength) return false;
  if (label.front() == '-' || label.back() == '-') return false;
  return std::all_of(label.begin(), label.end(),
                     [](char c) { return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '-'; });
}

// RFC 1123 host name without a trailing dot: dot-separated labels of 1-63 letters, digits and
// hyphens, no label starting or ending with '-', at most 253 characters in all.
bool IsValidHostName(std::string_view name) {
  if (name.empty() || name.size() > kMaxHostNameLength) return false;
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    std::string_view label =
        name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!IsValidLabel(label)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::string_view LastLabel(std::string_view name) {
  size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

std::string_view DropTrailingDot(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  return name;
}

// inet_pton wants a NUL-terminated string; an embedded NUL would cut the text short and let
// "1.2.3.4\0junk" through, so it is refused first.
bool ParseAddress(int family, std::string_view text, std::array<uint8_t, 16>& bytes) {
  bytes.fill(0);
  if (text.find('\0') != std::string_view::npos) return false;
  std::string copy(text);
  return inet_pton(family, copy.c_str(), bytes.data()) == 1;
}

std::string AddressText(int family, const std::array<uint8_t, 16>& bytes) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(family, bytes.data(), buf, sizeof(buf)) == nullptr) return "";
  return buf;
}

int MaxPrefix(int family) { return family == AF_INET ? 32 : 128; }

void ClearHostBits(std::array<uint8_t, 16>& bytes, int prefix) {
  for (int bit = prefix; bit < 128; ++bit) {
    bytes[static_cast<size_t>(bit / 8)] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
  }
}

// `text` is "addr" or "addr/prefix" of the given family. Fills kind, family, bytes, prefix and
// host.
Status ParseAddressOrCidr(std::string_view entry, int family, std::string_view text,
                          AllowlistEntry& out) {
  const std::string_view family_name = family == AF_INET ? "IPv4" : "IPv6";
  out.family = family;
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    if (!ParseAddress(family, text, out.bytes)) {
      return EntryError(entry, fmt::format("invalid {} address", family_name));
    }
    out.kind = AllowlistEntry::Kind::kAddress;
    out.prefix_length = MaxPrefix(family);
  } else {
    if (!ParseAddress(family, text.substr(0, slash), out.bytes)) {
      return EntryError(entry, "invalid CIDR address");
    }
    const int max = MaxPrefix(family);
    std::optional<unsigned> prefix =
        ParseDecimal(text.substr(slash + 1), static_cast<unsigned>(max));
    if (!prefix) return EntryError(entry, "invalid CIDR prefix (digits only)");
    if (*prefix > static_cast<unsigned>(max)) {
      return EntryError(entry, fmt::format("CIDR prefix out of range (0-{})", max));
    }
    out.kind = AllowlistEntry::Kind::kCidr;
    out.prefix_length = static_cast<int>(*prefix);
    ClearHostBits(out.bytes, out.prefix_length);
  }
  out.host = AddressText(family, out.bytes);
  return OkStatus();
}

Status ParsePort(std::string_view entry, std::string_view text, AllowlistEntry& out) {
  if (text.empty()) return EntryError(entry, "empty port");
  std::optional<unsigned> port = ParseDecimal(text, 65535);
  if (!port) return EntryError(entry, "invalid port (digits only)");
  if (*port < 1 || *port > 65535) return EntryError(entry, "port out of range (1-65535)");
  out.port = static_cast<uint16_t>(*port);
  return OkStatus();
}

Status ParseName(std::string_view entry, std::string_view text, AllowlistEntry& out) {
  std::string_view name = text;
  out.kind = AllowlistEntry::Kind::kHostName;
  if (name.substr(0, 2) == "*.") {
    out.kind = AllowlistEntry::Kind::kWildcardHostName;
    name.remove_prefix(2);
  }
  if (name.find('*') != std::string_view::npos) {
    return EntryError(entry, "invalid wildcard (only a whole first label, as in *.example.com)");
  }
  name = DropTrailingDot(name);
  // The wildcard's own "*." counts toward the 253: a name below the suffix must still fit.
  const size_t wildcard_length = out.kind == AllowlistEntry::Kind::kWildcardHostName ? 2 : 0;
  if (!IsValidHostName(name) || name.size() + wildcard_length > kMaxHostNameLength) {
    return EntryError(entry, "invalid host name");
  }
  if (AllDigits(LastLabel(name))) {
    // See the note above: numeric last labels are malformed addresses, not names.
    const bool all_numeric =
        std::all_of(name.begin(), name.end(), [](char c) { return IsAsciiDigit(c) || c == '.'; });
    return EntryError(entry, all_numeric && out.kind == AllowlistEntry::Kind::kHostName
                                 ? "invalid IPv4 address"
                                 : "invalid host name (the last label is all digits)");
  }
  out.host = AsciiLowerString(name);
  return OkStatus();
}

// Two or more ':' and a first group of hex digits only (possibly none, as in "::1"), as every
// IPv6 text has. The second test sends "example.com:80:90" and "1.2.3.4:80:90" to host:port,
// where they fail on their port ("80:90"), instead of reporting an IPv6 address nobody meant.
bool LooksLikeBareIpv6(std::string_view text) {
  if (std::count(text.begin(), text.end(), ':') < 2) return false;
  const std::string_view first_group = text.substr(0, text.find(':'));
  return std::all_of(first_group.begin(), first_group.end(), [](char c) {
    return IsAsciiDigit(c) || (AsciiLower(c) >= 'a' && AsciiLower(c) <= 'f');
  });
}

Result<AllowlistEntry> ParseBracketed(std::string_view entry) {
  AllowlistEntry out;
  const size_t close = entry.find(']');
  if (close == std::string_view::npos) return EntryError(entry, "missing \"]\"");
  const std::string_view inside = entry.substr(1, close - 1);
  const std::string_view after = entry.substr(close + 1);
  if (inside.find(':') == std::string_view::npos) {
    return EntryError(entry, "brackets are only for IPv6 addresses");
  }
  RETURN_IF_ERROR(ParseAddressOrCidr(entry, AF_INET6, inside, out));
  if (!after.empty()) {
    if (after.front() != ':') return EntryError(entry, "expected \":port\" after \"]\"");
    RETURN_IF_ERROR(ParsePort(entry, after.substr(1), out));
  }
  return out;
}

}  // namespace

std::string_view EgressPolicyName(SandboxEgressPolicy policy) {
  switch (policy) {
    case SandboxEgressPolicy::kNone:
      return "none";
    case SandboxEgressPolicy::kAllowlist:
      return "allowlist";
    case SandboxEgressPolicy::kOpen:
      return "open";
  }
  return "unknown";
}

Result<SandboxEgressPolicy> ParseEgressPolicy(std::string_view text) {
  for (SandboxEgressPolicy policy :
       {SandboxEgressPolicy::kNone, SandboxEgressPolicy::kAllowlist, SandboxEgressPolicy::kOpen}) {
    if (text == EgressPolicyName(policy)) return policy;
  }
  return InvalidArgumentError(
      fmt::format("unknown egress policy {:?} (expected none, allowlist or open)", text));
}

Result<AllowlistEntry> ParseAllowlistEntry(std::string_view text) {
  if (text.empty()) return EntryError(text, "empty entry");
  if (text.find("://") != std::string_view::npos) {
    return EntryError(text, "a URL is not an entry (write host[:port])");
  }
  if (text.front() == '[') return ParseBracketed(text);

  AllowlistEntry out;
  if (LooksLikeBareIpv6(text)) {
    // Bare IPv6: no port possible (see the note at the top).
    RETURN_IF_ERROR(ParseAddressOrCidr(text, AF_INET6, text, out));
    return out;
  }

  // The host is checked before the port, so an entry wrong in both reports its host.
  const size_t colon = text.find(':');
  const std::string_view host = text.substr(0, colon);
  if (host.empty()) return EntryError(text, "missing host");
  std::array<uint8_t, 16> probe{};
  if (host.find('/') != std::string_view::npos || ParseAddress(AF_INET, host, probe)) {
    RETURN_IF_ERROR(ParseAddressOrCidr(text, AF_INET, host, out));
  } else {
    RETURN_IF_ERROR(ParseName(text, host, out));
  }
  if (colon != std::string_view::npos) {
    RETURN_IF_ERROR(ParsePort(text, text.substr(colon + 1), out));
  }
  return out;
}

std::string AllowlistEntry::ToString() const {
  std::string base;
  switch (kind) {
    case Kind::kHostName:
    case Kind::kAddress:
      base = host;
      break;
    case Kind::kWildcardHostName:
      base = "*." + host;
      break;
    case Kind::kCidr:
      base = fmt::format("{}/{}", host, prefix_length);
      break;
  }
  if (!port) return base;
  if (family == AF_INET6) return fmt::format("[{}]:{}", base, *port);
  return fmt::format("{}:{}", base, *port);
}

bool AllowlistEntry::MatchesName(std::string_view name) const {
  if (!is_name()) return false;
  name = DropTrailingDot(name);
  // A query name that is not a valid host name matches nothing: fail closed rather than reason
  // about empty labels or odd characters.
  if (!IsValidHostName(name)) return false;
  const std::string lower = AsciiLowerString(name);
  if (kind == Kind::kHostName) return lower == host;
  // Strictly below the suffix: at least one whole label before ".<suffix>".
  if (lower.size() < host.size() + 2) return false;
  const size_t dot = lower.size() - host.size() - 1;
  return lower[dot] == '.' && std::string_view(lower).substr(dot + 1) == host;
}

bool AllowlistEntry::ContainsAddress(int address_family, const uint8_t* address_bytes) const {
  if (is_name() || address_bytes == nullptr || address_family != family) return false;
  if (family != AF_INET && family != AF_INET6) return false;
  const int whole_bytes = prefix_length / 8;
  if (std::memcmp(bytes.data(), address_bytes, static_cast<size_t>(whole_bytes)) != 0) {
    return false;
  }
  const int rest_bits = prefix_length % 8;
  if (rest_bits == 0) return true;
  const auto mask = static_cast<uint8_t>(0xFFu << (8 - rest_bits));
  const size_t i = static_cast<size_t>(whole_bytes);
  return (bytes[i] & mask) == (address_bytes[i] & mask);
}

Result<EgressPolicy> MakeEgressPolicy(SandboxEgressPolicy mode,
                                      const std::vector<std::string>& entries) {
  switch (mode) {
    case SandboxEgressPolicy::kNone:
    case SandboxEgressPolicy::kOpen:
      if (!entries.empty()) {
        return InvalidArgumentError(
            fmt::format("--allow entries are only for the allowlist policy (got egress \"{}\")",
                        EgressPolicyName(mode)));
      }
      return EgressPolicy{mode, {}};
    case SandboxEgressPolicy::kAllowlist:
      break;
    default:
      return InvalidArgumentError(
          fmt::format("unknown egress policy value {}", static_cast<int>(mode)));
  }
  if (entries.empty()) {
    return InvalidArgumentError("the allowlist policy needs at least one --allow entry");
  }
  EgressPolicy policy{mode, {}};
  for (const std::string& text : entries) {
    ASSIGN_OR_RETURN(AllowlistEntry entry, ParseAllowlistEntry(text));
    if (std::find(policy.allowlist.begin(), policy.allowlist.end(), entry) ==
        policy.allowlist.end()) {
      policy.allowlist.push_back(std::move(entry));
    }
  }
  return policy;
}

}  // namespace codespace
