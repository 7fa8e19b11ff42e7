#include "run/broker_address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;

// ---------------------------------------------------------------------------------------------
// ParseBrokerAddress.

struct ValidAddressCase {
  const char* text;
  BrokerAddress want;
  const char* canonical;
};

TEST(ParseBrokerAddressTest, AcceptsUnixPathsAndLoopbackTcp) {
  const ValidAddressCase cases[] = {
      {"unix:/run/broker.sock", BrokerAddress::Unix("/run/broker.sock"), "unix:/run/broker.sock"},
      {"unix:/a", BrokerAddress::Unix("/a"), "unix:/a"},
      {"127.0.0.1:8080", BrokerAddress::Tcp("127.0.0.1", 8080), "127.0.0.1:8080"},
      {"127.0.0.1:1", BrokerAddress::Tcp("127.0.0.1", 1), "127.0.0.1:1"},
      {"127.1.2.3:65535", BrokerAddress::Tcp("127.1.2.3", 65535), "127.1.2.3:65535"},
      {"[::1]:443", BrokerAddress::Tcp("::1", 443), "[::1]:443"},
      {"[0:0:0:0:0:0:0:1]:80", BrokerAddress::Tcp("::1", 80), "[::1]:80"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto got = ParseBrokerAddress(c.text);
    ASSERT_OK(got);
    EXPECT_EQ(*got, c.want);
    EXPECT_EQ(got->ToString(), c.canonical);
    auto again = ParseBrokerAddress(got->ToString());
    ASSERT_OK(again);
    EXPECT_EQ(*again, *got);
  }
}

struct InvalidAddressCase {
  std::string text;
  const char* message;
};

TEST(ParseBrokerAddressTest, RefusesNonLoopbackHostsAndMalformedForms) {
  const InvalidAddressCase cases[] = {
      {"", "empty"},
      {"unix:", "must be absolute"},
      {"unix:relative/b.sock", "must be absolute"},
      {"unix:/" + std::string(200, 'x'), "longer than"},
      {"10.0.0.1:80", "not a loopback address"},
      {"0.0.0.0:80", "not a loopback address"},
      {"203.0.113.10:443", "not a loopback address"},
      {"localhost:80", "not a loopback address"},
      {"api.anthropic.com:443", "not a loopback address"},
      {"[::2]:80", "not a loopback address"},
      {"[2001:db8::1]:8443", "not a loopback address"},
      {"[::ffff:127.0.0.1]:80", "not a loopback address"},
      {"[::]:80", "not a loopback address"},
      {"[nonsense]:80", "not an IPv6 address"},
      {"::1:80", "needs brackets"},
      {"[::1]80", "expected [IPv6]:PORT"},
      {"[::1]", "expected [IPv6]:PORT"},
      {"127.0.0.1", "expected unix:/path"},
      {"127.0.0.1:", "not a number"},
      {"127.0.0.1:0", "out of range"},
      {"127.0.0.1:65536", "out of range"},
      {"127.0.0.1:99999", "out of range"},
      {"127.0.0.1:123456", "not a number"},
      {"127.0.0.1:80x", "not a number"},
      {"127.0.0.1:-1", "not a number"},
      {"127.0.0.1:+80", "not a number"},
      {"[::1]:0", "out of range"},
      {"tcp:127.0.0.1:80", "expected unix:/path"},
      {"http://127.0.0.1:80", "expected unix:/path"},
      {"::1", "needs brackets"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto got = ParseBrokerAddress(c.text);
    EXPECT_THAT(got, StatusIs(StatusCode::kInvalidArgument));
    EXPECT_THAT(got, StatusHasMessage(c.message));
  }
}

}  // namespace
}  // namespace codespace
