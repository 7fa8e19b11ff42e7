#include "policy/egress_policy.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"

namespace codespace {
namespace {

// How an error message quotes the offending text: control characters escaped, so a stray byte
// cannot split the one-line error (\t, \n, \r as such, others as \xNN).
std::string Escaped(std::string_view in) {
  std::string out;
  for (char ch : in) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += ch;
  }
  return out;
}

using ::codespace::testing::IsOk;
using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Not;
using Kind = AllowlistEntry::Kind;

// Network-order bytes of an address text; fails the test when the text is not an address.
std::array<uint8_t, 16> Bytes(int family, const std::string& text) {
  std::array<uint8_t, 16> bytes{};
  EXPECT_EQ(inet_pton(family, text.c_str(), bytes.data()), 1) << text;
  return bytes;
}

std::string Repeat(char c, size_t n) { return std::string(n, c); }

// A name of exactly `length` characters made of 63-character labels and a shorter last one.
std::string NameOfLength(size_t length) {
  std::string name;
  while (name.size() < length) {
    if (!name.empty()) name += '.';
    name += Repeat('a', std::min<size_t>(63, length - name.size()));
  }
  return name;
}

// ---------------------------------------------------------------------------------------------
// Policy names.

TEST(EgressPolicyNameTest, NamesEveryMode) {
  EXPECT_EQ(EgressPolicyName(SandboxEgressPolicy::kNone), "none");
  EXPECT_EQ(EgressPolicyName(SandboxEgressPolicy::kAllowlist), "allowlist");
  EXPECT_EQ(EgressPolicyName(SandboxEgressPolicy::kOpen), "open");
  EXPECT_EQ(EgressPolicyName(static_cast<SandboxEgressPolicy>(42)), "unknown");
}

TEST(ParseEgressPolicyTest, ParsesEveryModeAndRoundTrips) {
  for (SandboxEgressPolicy mode :
       {SandboxEgressPolicy::kNone, SandboxEgressPolicy::kAllowlist, SandboxEgressPolicy::kOpen}) {
    Result<SandboxEgressPolicy> parsed = ParseEgressPolicy(EgressPolicyName(mode));
    ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, mode);
  }
}

class ParseEgressPolicyErrorTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ParseEgressPolicyErrorTest, RefusesWithExactMessage) {
  Result<SandboxEgressPolicy> parsed = ParseEgressPolicy(GetParam());
  EXPECT_THAT(parsed, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(
      parsed.status().message(),
      fmt::format("unknown egress policy \"{}\" (expected none, allowlist or open)",
                  Escaped(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(NotExactlyAName, ParseEgressPolicyErrorTest,
                         ::testing::Values("", "x", "None", "NONE", "Open", "ALLOWLIST", " none",
                                           "none ", "allow", "allowlist,", "allow-list", "closed",
                                           "opened", "filtered", "severed", "shared",
                                           "ex\xc3\xa4mple"));

// Control characters are escaped, so the error stays on one line.
TEST(ParseEgressPolicyTest, EscapesControlCharactersInTheError) {
  EXPECT_EQ(ParseEgressPolicy("open\n").status().message(),
            "unknown egress policy \"open\\n\" (expected none, allowlist or open)");
  EXPECT_EQ(ParseEgressPolicy(std::string("none\0", 5)).status().message(),
            "unknown egress policy \"none\\x00\" (expected none, allowlist or open)");
}

// ---------------------------------------------------------------------------------------------
// Accepted entries: every field of the parsed value, and the canonical text.

struct ValidCase {
  std::string input;
  Kind kind;
  std::string host;
  int family;  // 0 for names
  int prefix;  // 0 for names
  std::optional<uint16_t> port;
  std::string canonical;
};

void PrintTo(const ValidCase& c, std::ostream* os) { *os << '"' << c.input << '"'; }

std::vector<ValidCase> ValidCases() {
  const std::optional<uint16_t> any;
  const std::string max_name = NameOfLength(253);
  const std::string label63 = Repeat('b', 63);
  return {
      // Host names.
      {"api.anthropic.com", Kind::kHostName, "api.anthropic.com", 0, 0, any, "api.anthropic.com"},
      {"localhost", Kind::kHostName, "localhost", 0, 0, any, "localhost"},
      {"a", Kind::kHostName, "a", 0, 0, any, "a"},
      {"EXAMPLE.com", Kind::kHostName, "example.com", 0, 0, any, "example.com"},
      {"example.com.", Kind::kHostName, "example.com", 0, 0, any, "example.com"},
      {"Example.COM.:443", Kind::kHostName, "example.com", 0, 0, 443, "example.com:443"},
      {"example.com:443", Kind::kHostName, "example.com", 0, 0, 443, "example.com:443"},
      {"example.com:1", Kind::kHostName, "example.com", 0, 0, 1, "example.com:1"},
      {"example.com:65535", Kind::kHostName, "example.com", 0, 0, 65535, "example.com:65535"},
      {"example.com:080", Kind::kHostName, "example.com", 0, 0, 80, "example.com:80"},
      {"example.com:00000000000000000000443", Kind::kHostName, "example.com", 0, 0, 443,
       "example.com:443"},
      {"localhost:8080", Kind::kHostName, "localhost", 0, 0, 8080, "localhost:8080"},
      {"a-b.c--d.example", Kind::kHostName, "a-b.c--d.example", 0, 0, any, "a-b.c--d.example"},
      {"xn--bcher-kva.example", Kind::kHostName, "xn--bcher-kva.example", 0, 0, any,
       "xn--bcher-kva.example"},
      {"1a.example.com", Kind::kHostName, "1a.example.com", 0, 0, any, "1a.example.com"},
      {"0.example.com", Kind::kHostName, "0.example.com", 0, 0, any, "0.example.com"},
      {"123.example.com", Kind::kHostName, "123.example.com", 0, 0, any, "123.example.com"},
      {"example.123a", Kind::kHostName, "example.123a", 0, 0, any, "example.123a"},
      {"1.2.3.4a", Kind::kHostName, "1.2.3.4a", 0, 0, any, "1.2.3.4a"},
      {"beef", Kind::kHostName, "beef", 0, 0, any, "beef"},
      {"cafe:80", Kind::kHostName, "cafe", 0, 0, 80, "cafe:80"},
      {label63 + ".com", Kind::kHostName, label63 + ".com", 0, 0, any, label63 + ".com"},
      {max_name, Kind::kHostName, max_name, 0, 0, any, max_name},
      {max_name + ".", Kind::kHostName, max_name, 0, 0, any, max_name},
      {max_name + ".:443", Kind::kHostName, max_name, 0, 0, 443, max_name + ":443"},
      // Wildcards.
      {"*.githubusercontent.com", Kind::kWildcardHostName, "githubusercontent.com", 0, 0, any,
       "*.githubusercontent.com"},
      {"*.Example.COM.", Kind::kWildcardHostName, "example.com", 0, 0, any, "*.example.com"},
      {"*.example.com:443", Kind::kWildcardHostName, "example.com", 0, 0, 443, "*.example.com:443"},
      {"*.localhost", Kind::kWildcardHostName, "localhost", 0, 0, any, "*.localhost"},
      {"*.com", Kind::kWildcardHostName, "com", 0, 0, any, "*.com"},
      {"*." + NameOfLength(251), Kind::kWildcardHostName, NameOfLength(251), 0, 0, any,
       "*." + NameOfLength(251)},
      // IPv4 addresses.
      {"203.0.113.7", Kind::kAddress, "203.0.113.7", AF_INET, 32, any, "203.0.113.7"},
      {"203.0.113.7:8080", Kind::kAddress, "203.0.113.7", AF_INET, 32, 8080, "203.0.113.7:8080"},
      {"169.254.169.254", Kind::kAddress, "169.254.169.254", AF_INET, 32, any, "169.254.169.254"},
      {"0.0.0.0", Kind::kAddress, "0.0.0.0", AF_INET, 32, any, "0.0.0.0"},
      {"255.255.255.255:65535", Kind::kAddress, "255.255.255.255", AF_INET, 32, 65535,
       "255.255.255.255:65535"},
      {"127.0.0.1:1", Kind::kAddress, "127.0.0.1", AF_INET, 32, 1, "127.0.0.1:1"},
      // IPv4 CIDRs: host bits cleared.
      {"203.0.113.0/24", Kind::kCidr, "203.0.113.0", AF_INET, 24, any, "203.0.113.0/24"},
      {"203.0.113.7/24", Kind::kCidr, "203.0.113.0", AF_INET, 24, any, "203.0.113.0/24"},
      {"203.0.113.7/25", Kind::kCidr, "203.0.113.0", AF_INET, 25, any, "203.0.113.0/25"},
      {"203.0.113.200/25", Kind::kCidr, "203.0.113.128", AF_INET, 25, any, "203.0.113.128/25"},
      {"10.1.2.3/8", Kind::kCidr, "10.0.0.0", AF_INET, 8, any, "10.0.0.0/8"},
      {"10.0.0.0/08", Kind::kCidr, "10.0.0.0", AF_INET, 8, any, "10.0.0.0/8"},
      {"10.0.0.0/8:443", Kind::kCidr, "10.0.0.0", AF_INET, 8, 443, "10.0.0.0/8:443"},
      {"0.0.0.0/0", Kind::kCidr, "0.0.0.0", AF_INET, 0, any, "0.0.0.0/0"},
      {"255.255.255.255/0", Kind::kCidr, "0.0.0.0", AF_INET, 0, any, "0.0.0.0/0"},
      {"1.2.3.4/32", Kind::kCidr, "1.2.3.4", AF_INET, 32, any, "1.2.3.4/32"},
      {"1.2.3.255/31", Kind::kCidr, "1.2.3.254", AF_INET, 31, any, "1.2.3.254/31"},
      {"192.168.255.255/17", Kind::kCidr, "192.168.128.0", AF_INET, 17, any, "192.168.128.0/17"},
      // IPv6 addresses, bare: never a port.
      {"2001:db8::1", Kind::kAddress, "2001:db8::1", AF_INET6, 128, any, "2001:db8::1"},
      {"2001:DB8:0:0:0:0:0:1", Kind::kAddress, "2001:db8::1", AF_INET6, 128, any, "2001:db8::1"},
      {"2001:db8::1:443", Kind::kAddress, "2001:db8::1:443", AF_INET6, 128, any, "2001:db8::1:443"},
      {"::1", Kind::kAddress, "::1", AF_INET6, 128, any, "::1"},
      {"::", Kind::kAddress, "::", AF_INET6, 128, any, "::"},
      {"fd00:ec2::254", Kind::kAddress, "fd00:ec2::254", AF_INET6, 128, any, "fd00:ec2::254"},
      {"::ffff:1.2.3.4", Kind::kAddress, "::ffff:1.2.3.4", AF_INET6, 128, any, "::ffff:1.2.3.4"},
      {"::FFFF:203.0.113.7", Kind::kAddress, "::ffff:203.0.113.7", AF_INET6, 128, any,
       "::ffff:203.0.113.7"},
      {"1:2:3:4:5:6:7:8", Kind::kAddress, "1:2:3:4:5:6:7:8", AF_INET6, 128, any, "1:2:3:4:5:6:7:8"},
      {"cafe::80", Kind::kAddress, "cafe::80", AF_INET6, 128, any, "cafe::80"},
      // IPv6 CIDRs, bare.
      {"2001:db8::/32", Kind::kCidr, "2001:db8::", AF_INET6, 32, any, "2001:db8::/32"},
      {"2001:db8:abcd::1/48", Kind::kCidr, "2001:db8:abcd::", AF_INET6, 48, any,
       "2001:db8:abcd::/48"},
      {"2001:db8::ff/121", Kind::kCidr, "2001:db8::80", AF_INET6, 121, any, "2001:db8::80/121"},
      {"2001:db8::1/128", Kind::kCidr, "2001:db8::1", AF_INET6, 128, any, "2001:db8::1/128"},
      {"::/0", Kind::kCidr, "::", AF_INET6, 0, any, "::/0"},
      {"ffff::/0", Kind::kCidr, "::", AF_INET6, 0, any, "::/0"},
      {"2001:db8::/032", Kind::kCidr, "2001:db8::", AF_INET6, 32, any, "2001:db8::/32"},
      // Bracketed IPv6.
      {"[2001:db8::1]:8443", Kind::kAddress, "2001:db8::1", AF_INET6, 128, 8443,
       "[2001:db8::1]:8443"},
      {"[2001:db8::1]", Kind::kAddress, "2001:db8::1", AF_INET6, 128, any, "2001:db8::1"},
      {"[2001:DB8::1]:1", Kind::kAddress, "2001:db8::1", AF_INET6, 128, 1, "[2001:db8::1]:1"},
      {"[::1]:65535", Kind::kAddress, "::1", AF_INET6, 128, 65535, "[::1]:65535"},
      {"[::ffff:1.2.3.4]:80", Kind::kAddress, "::ffff:1.2.3.4", AF_INET6, 128, 80,
       "[::ffff:1.2.3.4]:80"},
      {"[2001:db8::/32]:443", Kind::kCidr, "2001:db8::", AF_INET6, 32, 443, "[2001:db8::/32]:443"},
      {"[2001:db8::/32]", Kind::kCidr, "2001:db8::", AF_INET6, 32, any, "2001:db8::/32"},
      {"[2001:db8::7/64]:080", Kind::kCidr, "2001:db8::", AF_INET6, 64, 80, "[2001:db8::/64]:80"},
  };
}

class ParseAllowlistEntryValidTest : public ::testing::TestWithParam<ValidCase> {};

TEST_P(ParseAllowlistEntryValidTest, ParsesEveryField) {
  const ValidCase& c = GetParam();
  Result<AllowlistEntry> parsed = ParseAllowlistEntry(c.input);
  ASSERT_OK(parsed);
  const AllowlistEntry& e = *parsed;
  EXPECT_EQ(e.kind, c.kind);
  EXPECT_EQ(e.host, c.host);
  EXPECT_EQ(e.family, c.family);
  EXPECT_EQ(e.prefix_length, c.prefix);
  EXPECT_EQ(e.port, c.port);
  EXPECT_EQ(e.is_name(), c.family == 0);
  if (c.family == 0) {
    EXPECT_EQ(e.bytes, (std::array<uint8_t, 16>{})) << "names carry no address bytes";
  } else {
    // The bytes are the canonical (network) address, and nothing past an IPv4 address's four.
    EXPECT_EQ(e.bytes, Bytes(c.family, c.host));
  }
}

TEST_P(ParseAllowlistEntryValidTest, ToStringIsCanonicalAndRoundTrips) {
  const ValidCase& c = GetParam();
  Result<AllowlistEntry> parsed = ParseAllowlistEntry(c.input);
  ASSERT_OK(parsed);
  const std::string text = parsed->ToString();
  EXPECT_EQ(text, c.canonical);
  Result<AllowlistEntry> again = ParseAllowlistEntry(text);
  ASSERT_OK(again);
  EXPECT_EQ(*again, *parsed);
  EXPECT_EQ(again->ToString(), text);
}

INSTANTIATE_TEST_SUITE_P(Table, ParseAllowlistEntryValidTest, ::testing::ValuesIn(ValidCases()));

TEST(ParseAllowlistEntryTest, EveryPortIsAcceptedAndRoundTrips) {
  for (unsigned port = 1; port <= 65535; ++port) {
    for (const char* format : {"example.com:{}", "*.example.com:{}", "203.0.113.7:{}",
                               "10.0.0.0/8:{}", "[2001:db8::1]:{}", "[2001:db8::/32]:{}"}) {
      const std::string text = fmt::format(fmt::runtime(format), port);
      Result<AllowlistEntry> parsed = ParseAllowlistEntry(text);
      ASSERT_OK(parsed) << text;
      ASSERT_EQ(parsed->port, port) << text;
      ASSERT_EQ(parsed->ToString(), text);
    }
  }
}

TEST(ParseAllowlistEntryTest, EveryIpv4PrefixClearsExactlyTheHostBits) {
  for (int prefix = 0; prefix <= 32; ++prefix) {
    const std::string text = fmt::format("255.255.255.255/{}", prefix);
    Result<AllowlistEntry> parsed = ParseAllowlistEntry(text);
    ASSERT_OK(parsed) << text;
    EXPECT_EQ(parsed->kind, Kind::kCidr);
    EXPECT_EQ(parsed->prefix_length, prefix);
    const uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
    in_addr expected{htonl(mask)};
    char buf[INET_ADDRSTRLEN] = {};
    ASSERT_NE(inet_ntop(AF_INET, &expected, buf, sizeof(buf)), nullptr);
    EXPECT_EQ(parsed->host, buf) << text;
    EXPECT_EQ(parsed->ToString(), fmt::format("{}/{}", buf, prefix));
    EXPECT_EQ(*ParseAllowlistEntry(parsed->ToString()), *parsed);
  }
}

TEST(ParseAllowlistEntryTest, EveryIpv6PrefixClearsExactlyTheHostBits) {
  for (int prefix = 0; prefix <= 128; ++prefix) {
    const std::string text = fmt::format("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/{}", prefix);
    Result<AllowlistEntry> parsed = ParseAllowlistEntry(text);
    ASSERT_OK(parsed) << text;
    EXPECT_EQ(parsed->prefix_length, prefix);
    std::array<uint8_t, 16> expected{};
    for (int bit = 0; bit < prefix; ++bit) {
      expected[static_cast<size_t>(bit / 8)] |= static_cast<uint8_t>(0x80u >> (bit % 8));
    }
    EXPECT_EQ(parsed->bytes, expected) << text;
    Result<AllowlistEntry> again = ParseAllowlistEntry(parsed->ToString());
    ASSERT_OK(again);
    EXPECT_EQ(*again, *parsed);
  }
}

// ---------------------------------------------------------------------------------------------
// Refused entries: the exact message, naming the entry and what is wrong.

struct InvalidCase {
  std::string input;
  std::string what;  // the message after `allowlist entry "<input>": `
};

void PrintTo(const InvalidCase& c, std::ostream* os) { *os << '"' << c.input << '"'; }

std::vector<InvalidCase> InvalidCases() {
  const std::string kHost = "invalid host name";
  const std::string kNumericLast = "invalid host name (the last label is all digits)";
  const std::string kWildcard = "invalid wildcard (only a whole first label, as in *.example.com)";
  const std::string kV4 = "invalid IPv4 address";
  const std::string kV6 = "invalid IPv6 address";
  const std::string kPortRange = "port out of range (1-65535)";
  const std::string kPortDigits = "invalid port (digits only)";
  const std::string kEmptyPort = "empty port";
  const std::string kCidrAddress = "invalid CIDR address";
  const std::string kCidrDigits = "invalid CIDR prefix (digits only)";
  const std::string kV4Prefix = "CIDR prefix out of range (0-32)";
  const std::string kV6Prefix = "CIDR prefix out of range (0-128)";
  const std::string kBrackets = "brackets are only for IPv6 addresses";
  const std::string kAfterBracket = "expected \":port\" after \"]\"";
  const std::string kUrl = "a URL is not an entry (write host[:port])";
  return {
      {"", "empty entry"},
      // Host names.
      {"exa mple.com", kHost},
      {" a.com", kHost},
      {"a.com ", kHost},
      {" 1.2.3.4", kHost},
      {"1.2.3.4 ", kHost},
      {" a.com:443", kHost},
      {"a..com", kHost},
      {".a.com", kHost},
      {".", kHost},
      {"..", kHost},
      {"a.com..", kHost},
      {"-a.com", kHost},
      {"a-.com", kHost},
      {"a.-b.com", kHost},
      {"a.b-.com", kHost},
      {"a_b.com", kHost},
      {"_dmarc.example.com", kHost},
      {"exa!mple.com", kHost},
      {"ex\xc3\xa4mple.com", kHost},
      {Repeat('a', 64) + ".com", kHost},
      {NameOfLength(254), kHost},
      {NameOfLength(254) + ".", kHost},
      {"example.com/", kCidrAddress},
      {"example.com/path", kCidrAddress},
      {"a]:80", kHost},
      {"localhost:80:90", kPortDigits},
      {"example.com:80:90", kPortDigits},
      {"https://example.com", kUrl},
      {"http://[::1]:80/", kUrl},
      // Numeric last labels.
      {"256.1.1.1", kV4},
      {"1.2.3", kV4},
      {"10.1", kV4},
      {"123", kV4},
      {"1.2.3.4.5", kV4},
      {"01.2.3.4", kV4},
      {"1.2.3.4.", kV4},
      {"4294967295", kV4},
      {"1.2.3.4.:80", kV4},
      {"example.123", kNumericLast},
      {"0x7f.1", kNumericLast},
      {"*.1.2.3.4", kNumericLast},
      {"*.example.123", kNumericLast},
      // Wildcards.
      {"*", kWildcard},
      {"*:443", kWildcard},
      {"a.*.com", kWildcard},
      {"*example.com", kWildcard},
      {"**.example.com", kWildcard},
      {"*.*.example.com", kWildcard},
      {"a*.example.com", kWildcard},
      {"*.example.*", kWildcard},
      {"*a.example.com", kWildcard},
      {"*.", kHost},
      {"*..", kHost},
      {"*..example.com", kHost},
      {"*.-a.com", kHost},
      {" *.a.com", kWildcard},
      {"*." + NameOfLength(252), kHost},
      // Ports.
      {"example.com:70000", kPortRange},
      {"example.com:0", kPortRange},
      {"example.com:00", kPortRange},
      {"example.com:65536", kPortRange},
      {"example.com:99999999999999999999999", kPortRange},
      {"example.com:", kEmptyPort},
      {"example.com:http", kPortDigits},
      {"example.com:+80", kPortDigits},
      {"example.com:-1", kPortDigits},
      {"example.com: 80", kPortDigits},
      {"example.com:80 ", kPortDigits},
      {"example.com:0x50", kPortDigits},
      {"example.com:8o", kPortDigits},
      {"*.example.com:0", kPortRange},
      {"1.2.3.4:0", kPortRange},
      {"1.2.3.4:", kEmptyPort},
      {"1.2.3.4:80:90", kPortDigits},
      {"10.0.0.0/8:", kEmptyPort},
      {"10.0.0.0/8:65536", kPortRange},
      {":80", "missing host"},
      {":", "missing host"},
      {"exa mple.com:0", kHost},  // the host is reported before the port
      // CIDRs.
      {"10.0.0.0/33", kV4Prefix},
      {"10.0.0.0/99999999999999999999", kV4Prefix},
      {"10.0.0.0/", kCidrDigits},
      {"10.0.0.0/-1", kCidrDigits},
      {"10.0.0.0/+8", kCidrDigits},
      {"10.0.0.0/ 8", kCidrDigits},
      {"10.0.0.0/8 ", kCidrDigits},
      {"10.0.0.0/8/8", kCidrDigits},
      {"10.0.0.0/a", kCidrDigits},
      {"10.0.0.0/33:443", kV4Prefix},
      {"/8", kCidrAddress},
      {"256.0.0.0/8", kCidrAddress},
      {"10.0.0/8", kCidrAddress},
      {" 10.0.0.0/8", kCidrAddress},
      {"2001:db8::/129", kV6Prefix},
      {"2001:db8::/", kCidrDigits},
      {"2001:db8::/0x20", kCidrDigits},
      {"2001:db8::g/32", kCidrAddress},
      {"/32:443", kCidrAddress},
      // Bare IPv6.
      {"2001:db8::g", kV6},
      {"2001:db8:::1", kV6},
      {"1:2:3:4:5:6:7:8:9", kV6},
      {"12345::1", kV6},
      {"beef:80:90", kV6},
      {"fe80::1%eth0", kV6},
      {"2001:db8::1 ", kV6},
      {"::1 ", kV6},
      {" ::1", kHost},
      {"a:b:c", kV6},
      {"2001:db8::1]:443", kV6},
      {"::ffff:1.2.3.256", kV6},
      // Bracketed.
      {"[1.2.3.4]:80", kBrackets},
      {"[1.2.3.4]", kBrackets},
      {"[10.0.0.0/8]:443", kBrackets},
      {"[example.com]:443", kBrackets},
      {"[]", kBrackets},
      {"[]:80", kBrackets},
      {"[2001:db8::1", "missing \"]\""},
      {"[", "missing \"]\""},
      {"[2001:db8::1]:", kEmptyPort},
      {"[2001:db8::1]:70000", kPortRange},
      {"[2001:db8::1]:0", kPortRange},
      {"[2001:db8::1]:80:90", kPortDigits},
      {"[2001:db8::1]:http", kPortDigits},
      {"[2001:db8::1]8443", kAfterBracket},
      {"[2001:db8::1] :80", kAfterBracket},
      {"[2001:db8::1]]", kAfterBracket},
      {"[2001:db8::1] ", kAfterBracket},
      {"[ 2001:db8::1]:80", kV6},
      {"[2001:db8::g]:80", kV6},
      {"[fe80::1%eth0]:80", kV6},
      {"[[::1]]:80", kV6},
      {"[2001:db8::/129]:443", kV6Prefix},
      {"[2001:db8::/]:443", kCidrDigits},
      {"[2001:db8::g/32]:443", kCidrAddress},
      {"[2001:db8::g]:0", kV6},  // the address is reported before the port
  };
}

class ParseAllowlistEntryInvalidTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(ParseAllowlistEntryInvalidTest, RefusesWithExactMessage) {
  const InvalidCase& c = GetParam();
  Result<AllowlistEntry> parsed = ParseAllowlistEntry(c.input);
  EXPECT_THAT(parsed, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(parsed.status().message(), fmt::format("allowlist entry \"{}\": {}", Escaped(c.input), c.what));
}

INSTANTIATE_TEST_SUITE_P(Table, ParseAllowlistEntryInvalidTest,
                         ::testing::ValuesIn(InvalidCases()));

// Control characters and NUL are refused, and escaped in the error so that it stays one line.
TEST(ParseAllowlistEntryTest, EscapesControlCharactersInTheError) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\ta.com", R"(allowlist entry "\ta.com": invalid host name)"},
      {"a.com\n", R"(allowlist entry "a.com\n": invalid host name)"},
      {"a.com\r\nforged log line",
       R"(allowlist entry "a.com\r\nforged log line": invalid host name)"},
      {std::string("a\0b.com", 7), R"(allowlist entry "a\x00b.com": invalid host name)"},
      {std::string("1.2.3.4\0junk", 12), R"(allowlist entry "1.2.3.4\x00junk": invalid host name)"},
      {std::string("[::1\0]:80", 9), R"(allowlist entry "[::1\x00]:80": invalid IPv6 address)"},
      {"a\"b.com", R"(allowlist entry "a\"b.com": invalid host name)"},
      {"a\\b.com", R"(allowlist entry "a\\b.com": invalid host name)"},
      {"example.com:\x1b[31m",
       R"(allowlist entry "example.com:\x1b[31m": invalid port (digits only))"},
  };
  for (const auto& [input, message] : cases) {
    Result<AllowlistEntry> parsed = ParseAllowlistEntry(input);
    EXPECT_THAT(parsed, StatusIs(StatusCode::kInvalidArgument));
    EXPECT_EQ(parsed.status().message(), message);
    EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos);
  }
}

// Random text over the characters entries are made of: nothing crashes, every error names the
// entry, and everything accepted round-trips through its canonical text.
TEST(ParseAllowlistEntryTest, RandomTextIsRefusedCleanlyOrRoundTrips) {
  const std::string alphabet = "0123456789abcdefxAZ.:/[]*- %_";
  std::mt19937 rng(20240601);
  std::uniform_int_distribution<size_t> length(0, 24);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string text(length(rng), ' ');
    for (char& c : text) c = alphabet[pick(rng)];
    Result<AllowlistEntry> parsed = ParseAllowlistEntry(text);
    if (!parsed.ok()) {
      ASSERT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << text;
      ASSERT_THAT(parsed.status().message(),
                  ::testing::StartsWith(fmt::format("allowlist entry \"{}\": ", text)));
      continue;
    }
    ++accepted;
    Result<AllowlistEntry> again = ParseAllowlistEntry(parsed->ToString());
    ASSERT_OK(again) << text << " -> " << parsed->ToString();
    ASSERT_EQ(*again, *parsed) << text;
  }
  EXPECT_GT(accepted, 0) << "the alphabet should produce some valid entries";
}

// ---------------------------------------------------------------------------------------------
// MatchesName.

struct NameMatchCase {
  std::string entry;
  std::string name;
  bool matches;
};

void PrintTo(const NameMatchCase& c, std::ostream* os) {
  *os << '"' << c.entry << "\" vs \"" << c.name << '"';
}

class MatchesNameTest : public ::testing::TestWithParam<NameMatchCase> {};

TEST_P(MatchesNameTest, Matches) {
  const NameMatchCase& c = GetParam();
  Result<AllowlistEntry> entry = ParseAllowlistEntry(c.entry);
  ASSERT_OK(entry);
  EXPECT_EQ(entry->MatchesName(c.name), c.matches);
}

INSTANTIATE_TEST_SUITE_P(Table, MatchesNameTest,
                         ::testing::ValuesIn(std::vector<NameMatchCase>{
                             {"example.com", "example.com", true},
                             {"example.com", "EXAMPLE.COM", true},
                             {"example.com", "Example.Com.", true},
                             {"example.com", "example.com.", true},
                             {"EXAMPLE.COM.", "example.com", true},
                             {"example.com:443", "example.com",
                              true},  // the port is checked elsewhere
                             {"example.com", "a.example.com", false},
                             {"example.com", "example.co", false},
                             {"example.com", "example.com..", false},
                             {"example.com", "xexample.com", false},
                             {"example.com", "example.com.evil", false},
                             {"example.com", "", false},
                             {"example.com", ".", false},
                             {"example.com", "example.com:443", false},
                             {"example.com", " example.com", false},
                             {"example.com", std::string("example.com\0", 12), false},
                             {"localhost", "LOCALHOST", true},
                             {"localhost", "localhost.", true},
                             {"*.example.com", "a.example.com", true},
                             {"*.example.com", "A.B.EXAMPLE.COM.", true},
                             {"*.example.com", "x-1.deep.er.example.com", true},
                             {"*.Example.Com", "a.example.com", true},
                             {"*.example.com:443", "a.example.com", true},
                             {"*.example.com", "example.com", false},
                             {"*.example.com", "example.com.", false},
                             {"*.example.com", "EXAMPLE.COM", false},
                             {"*.example.com", ".example.com", false},
                             {"*.example.com", "aexample.com", false},
                             {"*.example.com", "xaexample.com", false},
                             {"*.example.com", "a.example.com.evil", false},
                             {"*.example.com", "a.example.co", false},
                             {"*.example.com", "a..example.com", false},
                             {"*.example.com", "*.example.com", false},
                             {"*.example.com", "a.example.com..", false},
                             {"*.example.com", "a_b.example.com", false},
                             {"*.example.com", "com", false},
                             {"*.example.com", "", false},
                             {"*.com", "example.com", true},
                             {"*.com", "com", false},
                             {"203.0.113.7", "203.0.113.7", false},
                             {"203.0.113.0/24", "203.0.113.7", false},
                             {"2001:db8::1", "2001:db8::1", false},
                         }));

// ---------------------------------------------------------------------------------------------
// ContainsAddress.

struct AddressMatchCase {
  std::string entry;
  int family;
  std::string address;
  bool contains;
};

void PrintTo(const AddressMatchCase& c, std::ostream* os) {
  *os << '"' << c.entry << "\" vs " << c.address;
}

class ContainsAddressTest : public ::testing::TestWithParam<AddressMatchCase> {};

TEST_P(ContainsAddressTest, Contains) {
  const AddressMatchCase& c = GetParam();
  Result<AllowlistEntry> entry = ParseAllowlistEntry(c.entry);
  ASSERT_OK(entry);
  const std::array<uint8_t, 16> bytes = Bytes(c.family, c.address);
  EXPECT_EQ(entry->ContainsAddress(c.family, bytes.data()), c.contains);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ContainsAddressTest,
    ::testing::ValuesIn(std::vector<AddressMatchCase>{
        {"203.0.113.7", AF_INET, "203.0.113.7", true},
        {"203.0.113.7:443", AF_INET, "203.0.113.7", true},  // the port is checked elsewhere
        {"203.0.113.7", AF_INET, "203.0.113.8", false},
        {"203.0.113.7", AF_INET, "203.0.113.6", false},
        {"203.0.113.7", AF_INET, "3.0.113.7", false},
        {"203.0.113.7", AF_INET6, "::ffff:203.0.113.7", false},
        {"203.0.113.0/24", AF_INET, "203.0.113.0", true},
        {"203.0.113.0/24", AF_INET, "203.0.113.7", true},
        {"203.0.113.0/24", AF_INET, "203.0.113.255", true},
        {"203.0.113.0/24", AF_INET, "203.0.114.0", false},
        {"203.0.113.0/24", AF_INET, "203.0.112.255", false},
        {"203.0.113.0/24", AF_INET6, "::ffff:203.0.113.7", false},
        {"203.0.113.0/24", AF_INET6, "cb00:7100::", false},  // same leading bytes, other family
        {"203.0.113.128/25", AF_INET, "203.0.113.128", true},
        {"203.0.113.128/25", AF_INET, "203.0.113.255", true},
        {"203.0.113.128/25", AF_INET, "203.0.113.127", false},
        {"10.0.0.0/8", AF_INET, "10.255.255.255", true},
        {"10.0.0.0/8", AF_INET, "11.0.0.0", false},
        {"10.0.0.0/8", AF_INET, "9.255.255.255", false},
        {"172.16.0.0/12", AF_INET, "172.31.255.255", true},
        {"172.16.0.0/12", AF_INET, "172.32.0.0", false},
        {"1.2.3.4/32", AF_INET, "1.2.3.4", true},
        {"1.2.3.4/32", AF_INET, "1.2.3.5", false},
        {"1.2.3.4/31", AF_INET, "1.2.3.5", true},
        {"1.2.3.4/31", AF_INET, "1.2.3.6", false},
        {"0.0.0.0/0", AF_INET, "0.0.0.0", true},
        {"0.0.0.0/0", AF_INET, "255.255.255.255", true},
        {"0.0.0.0/0", AF_INET6, "::", false},
        {"169.254.169.254", AF_INET, "169.254.169.254", true},
        {"2001:db8::1", AF_INET6, "2001:db8::1", true},
        {"[2001:db8::1]:8443", AF_INET6, "2001:db8::1", true},
        {"2001:db8::1", AF_INET6, "2001:db8::2", false},
        {"2001:db8::1", AF_INET6, "2001:db8:0:1::1", false},
        {"2001:db8::/32", AF_INET6, "2001:db8::", true},
        {"2001:db8::/32", AF_INET6, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", true},
        {"2001:db8::/32", AF_INET6, "2001:db9::", false},
        {"2001:db8::/32", AF_INET6, "2001:db7:ffff::", false},
        {"2001:db8::/32", AF_INET, "32.1.13.184", false},  // same leading bytes, other family
        {"2001:db8::80/121", AF_INET6, "2001:db8::ff", true},
        {"2001:db8::80/121", AF_INET6, "2001:db8::7f", false},
        {"2001:db8::/127", AF_INET6, "2001:db8::1", true},
        {"2001:db8::/127", AF_INET6, "2001:db8::2", false},
        {"::/0", AF_INET6, "ffff::1", true},
        {"::/0", AF_INET6, "::", true},
        {"::/0", AF_INET, "0.0.0.0", false},
        {"::ffff:1.2.3.4", AF_INET6, "::ffff:1.2.3.4", true},
        {"::ffff:1.2.3.4", AF_INET, "1.2.3.4", false},
        {"example.com", AF_INET, "203.0.113.7", false},
        {"*.example.com", AF_INET6, "2001:db8::1", false},
    }));

TEST(ContainsAddressEdgeTest, RefusesNullBytesAndUnknownFamilies) {
  Result<AllowlistEntry> entry = ParseAllowlistEntry("0.0.0.0/0");
  ASSERT_OK(entry);
  const std::array<uint8_t, 16> zeros{};
  EXPECT_TRUE(entry->ContainsAddress(AF_INET, zeros.data()));
  EXPECT_FALSE(entry->ContainsAddress(AF_INET, nullptr));
  EXPECT_FALSE(entry->ContainsAddress(AF_UNIX, zeros.data()));
  EXPECT_FALSE(entry->ContainsAddress(0, zeros.data()));
}

// ---------------------------------------------------------------------------------------------
// MakeEgressPolicy.

std::vector<std::string> Canonical(const EgressPolicy& policy) {
  std::vector<std::string> out;
  for (const AllowlistEntry& e : policy.allowlist) out.push_back(e.ToString());
  return out;
}

TEST(MakeEgressPolicyTest, NoneAndOpenTakeNoEntries) {
  for (SandboxEgressPolicy mode : {SandboxEgressPolicy::kNone, SandboxEgressPolicy::kOpen}) {
    Result<EgressPolicy> policy = MakeEgressPolicy(mode, {});
    ASSERT_OK(policy);
    EXPECT_EQ(policy->mode, mode);
    EXPECT_TRUE(policy->allowlist.empty());
    EXPECT_EQ(*policy, (EgressPolicy{mode, {}}));
  }
}

TEST(MakeEgressPolicyTest, NoneAndOpenRefuseEntries) {
  struct Case {
    SandboxEgressPolicy mode;
    std::vector<std::string> entries;
    std::string message;
  };
  const std::vector<Case> cases = {
      {SandboxEgressPolicy::kNone,
       {"example.com"},
       "--allow entries are only for the allowlist policy (got egress \"none\")"},
      {SandboxEgressPolicy::kOpen,
       {"example.com", "10.0.0.0/8"},
       "--allow entries are only for the allowlist policy (got egress \"open\")"},
      // Even a bad entry: the mode is the first mistake to report.
      {SandboxEgressPolicy::kNone,
       {"exa mple.com"},
       "--allow entries are only for the allowlist policy (got egress \"none\")"},
      {SandboxEgressPolicy::kOpen,
       {""},
       "--allow entries are only for the allowlist policy (got egress \"open\")"},
  };
  for (const Case& c : cases) {
    Result<EgressPolicy> policy = MakeEgressPolicy(c.mode, c.entries);
    EXPECT_THAT(policy, StatusIs(StatusCode::kInvalidArgument));
    EXPECT_EQ(policy.status().message(), c.message);
  }
}

TEST(MakeEgressPolicyTest, AllowlistNeedsAnEntry) {
  Result<EgressPolicy> policy = MakeEgressPolicy(SandboxEgressPolicy::kAllowlist, {});
  EXPECT_THAT(policy, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(policy.status().message(), "the allowlist policy needs at least one --allow entry");
}

TEST(MakeEgressPolicyTest, AllowlistParsesEveryEntryInOrder) {
  Result<EgressPolicy> policy =
      MakeEgressPolicy(SandboxEgressPolicy::kAllowlist,
                       {"api.anthropic.com", "*.githubusercontent.com", "example.com:443",
                        "203.0.113.0/24", "[2001:db8::1]:8443", "2001:db8::/32"});
  ASSERT_OK(policy);
  EXPECT_EQ(policy->mode, SandboxEgressPolicy::kAllowlist);
  EXPECT_THAT(Canonical(*policy),
              ElementsAre("api.anthropic.com", "*.githubusercontent.com", "example.com:443",
                          "203.0.113.0/24", "[2001:db8::1]:8443", "2001:db8::/32"));
  EXPECT_EQ(policy->allowlist[0], *ParseAllowlistEntry("api.anthropic.com"));
}

TEST(MakeEgressPolicyTest, DuplicatesAreKeptOnceInFirstOrder) {
  Result<EgressPolicy> policy =
      MakeEgressPolicy(SandboxEgressPolicy::kAllowlist,
                       {"b.com", "A.com", "a.com.", "b.com:443", "b.com", "[2001:db8::1]",
                        "2001:db8::1", "2001:DB8::1", "203.0.113.7/24", "203.0.113.0/24", "1.2.3.4",
                        "1.2.3.4/32", "*.b.com", "B.COM:0443"});
  ASSERT_OK(policy);
  EXPECT_THAT(Canonical(*policy),
              ElementsAre("b.com", "a.com", "b.com:443", "2001:db8::1", "203.0.113.0/24", "1.2.3.4",
                          "1.2.3.4/32", "*.b.com"));
}

TEST(MakeEgressPolicyTest, TheFirstBadEntryIsReported) {
  struct Case {
    std::vector<std::string> entries;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"a.com", "exa mple.com", "c.com:0"}, "allowlist entry \"exa mple.com\": invalid host name"},
      {{"a.com", "c.com:0", "exa mple.com"},
       "allowlist entry \"c.com:0\": port out of range (1-65535)"},
      {{""}, "allowlist entry \"\": empty entry"},
      {{"10.0.0.0/8", "10.0.0.0/33"},
       "allowlist entry \"10.0.0.0/33\": CIDR prefix out of range (0-32)"},
      {{"[1.2.3.4]:80"}, "allowlist entry \"[1.2.3.4]:80\": brackets are only for IPv6 addresses"},
  };
  for (const Case& c : cases) {
    Result<EgressPolicy> policy = MakeEgressPolicy(SandboxEgressPolicy::kAllowlist, c.entries);
    EXPECT_THAT(policy, StatusIs(StatusCode::kInvalidArgument));
    EXPECT_EQ(policy.status().message(), c.message);
  }
}

TEST(MakeEgressPolicyTest, RefusesAnUnknownMode) {
  Result<EgressPolicy> policy = MakeEgressPolicy(static_cast<SandboxEgressPolicy>(7), {});
  EXPECT_THAT(policy, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(policy, StatusHasMessage("unknown egress policy value 7"));
  EXPECT_THAT(policy, Not(IsOk()));
}

}  // namespace
}  // namespace codespace
