#include "net/nft_ruleset.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"
#include "net/netns.h"
#include "net/nftables.h"

namespace codespace {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

RunFirewall Firewall(const std::vector<std::string>& entries, bool ipv6) {
  RunFirewall fw;
  for (const auto& e : entries) fw.allowlist.push_back(*ParseAllowlistEntry(e));
  fw.pool = AddressPool::Default();
  fw.addresses = AddressesForSlot(fw.pool, 3);
  fw.ipv6 = ipv6;
  fw.worker_addresses = {*ParseIpAddress("198.51.100.2"), *ParseIpAddress("2001:db8:100::2"),
                         *ParseIpAddress("10.201.0.13")};
  return fw;
}

// The order of the output chain is the policy: pin it line by line.
TEST(RunNamespaceRulesetTest, OutputChainInOrder) {
  std::string r = RunNamespaceRuleset(
      Firewall({"203.0.113.0/24", "198.51.100.2:8080", "allowed.test", "2001:db8:1::10"}, true));
  auto at = [&](const std::string& needle) {
    size_t p = r.find(needle);
    EXPECT_NE(p, std::string::npos) << "missing: " << needle << "\n" << r;
    return p;
  };
  size_t policy = at("type filter hook output priority filter; policy drop;");
  size_t lo = at("oif \"lo\" accept");
  size_t est = at("ct state established,related accept");
  size_t dns = at("ip daddr 10.201.0.13 meta l4proto { tcp, udp } th dport 53 accept");
  size_t dns6 = at("ip6 daddr fd63:6373:7061:3::1 meta l4proto { tcp, udp } th dport 53 accept");
  size_t listed = at("ip daddr 198.51.100.2 meta l4proto { tcp, udp } th dport 8080 accept");
  size_t listed6 = at("ip6 daddr 2001:db8:1::10 meta l4proto { tcp, udp } accept");
  size_t blocked = at("ip daddr @blocked4 counter name dropped drop");
  size_t blocked6 = at("ip6 daddr @blocked6 counter name dropped drop");
  size_t cidr = at("ip daddr 203.0.113.0/24 meta l4proto { tcp, udp } accept");
  size_t dyn = at("ip daddr @dns_any4 meta l4proto { tcp, udp } accept");
  size_t dynport = at("meta l4proto { tcp, udp } ip daddr . th dport @dns_port4 accept");
  size_t last = at("counter name dropped drop\n  }");
  EXPECT_LT(policy, lo);
  EXPECT_LT(lo, est);
  EXPECT_LT(est, dns);
  EXPECT_LT(dns, dns6);
  // Listed by address: before the worker/metadata block, so it is reachable.
  EXPECT_LT(listed, blocked);
  EXPECT_LT(listed6, blocked);
  EXPECT_LT(blocked, blocked6);
  // CIDRs and DNS admissions after it: a CIDR cannot open the metadata or worker addresses.
  EXPECT_LT(blocked6, cidr);
  EXPECT_LT(cidr, dyn);
  EXPECT_LT(dyn, dynport);
  EXPECT_LT(dynport, last);
  // Names are never rules: they reach the firewall only through the DNS gate's sets.
  EXPECT_THAT(r, Not(HasSubstr("allowed.test")));
}

TEST(RunNamespaceRulesetTest, BlockedSetsHoldMetadataWorkerAndPool) {
  std::string r = RunNamespaceRuleset(Firewall({"203.0.113.7"}, true));
  EXPECT_THAT(r, HasSubstr("elements = { 169.254.169.254, 10.201.0.0/16, 198.51.100.2, 10.201.0.13 }"));
  EXPECT_THAT(r, HasSubstr("elements = { fd00:ec2::254, fd63:6373:7061::/48, 2001:db8:100::2 }"));
}

TEST(RunNamespaceRulesetTest, NoIpv6MeansNoIpv6Accepts) {
  std::string r = RunNamespaceRuleset(Firewall({"2001:db8::/32", "203.0.113.7"}, false));
  EXPECT_THAT(r, Not(HasSubstr("ip6 daddr 2001:db8::/32")));
  EXPECT_THAT(r, Not(HasSubstr("@dns_any6 meta")));
  EXPECT_THAT(r, Not(HasSubstr("icmpv6")));
  EXPECT_THAT(r, HasSubstr("ip daddr 203.0.113.7 meta l4proto { tcp, udp } accept"));
}

TEST(RunNamespaceRulesetTest, InputAcceptsOnlyRepliesAndLoopback) {
  std::string r = RunNamespaceRuleset(Firewall({"203.0.113.7"}, false));
  size_t in = r.find("chain input");
  ASSERT_NE(in, std::string::npos);
  std::string input = r.substr(in);
  EXPECT_THAT(input, HasSubstr("policy drop;"));
  EXPECT_THAT(input, HasSubstr("iif \"lo\" accept"));
  EXPECT_THAT(input, HasSubstr("ct state established,related accept"));
}

TEST(WorkerNatRulesetTest, MasqueradeAndForwardForTheVethOnly) {
  RunAddresses a = AddressesForSlot(AddressPool::Default(), 1);
  std::string r = WorkerNatRuleset("codespace_0123456789ab", "cs0123456789abh", a, true);
  EXPECT_THAT(r, HasSubstr("table inet codespace_0123456789ab {"));
  EXPECT_THAT(r, HasSubstr("ip saddr 10.201.0.6/30 oifname != \"cs0123456789abh\" masquerade"));
  EXPECT_THAT(r, HasSubstr("ip6 saddr fd63:6373:7061:1::2/64 oifname != \"cs0123456789abh\" masquerade"));
  EXPECT_THAT(r, HasSubstr("iifname \"cs0123456789abh\" accept"));
  EXPECT_THAT(r, HasSubstr("oifname \"cs0123456789abh\" ct state established,related accept"));
  EXPECT_THAT(r, HasSubstr("oifname \"cs0123456789abh\" drop"));
  EXPECT_EQ(WorkerTableName("cs-0123456789ab"), "codespace_0123456789ab");
}

TEST(AdmissionTest, SetsAndElements) {
  DnsAdmission any4{*ParseIpAddress("203.0.113.10"), std::nullopt, 65};
  DnsAdmission port6{*ParseIpAddress("2001:db8:1::10"), 443, 7};
  EXPECT_EQ(AdmitCommand({any4, port6}),
            "add element inet codespace dns_any4 { 203.0.113.10 timeout 65s }\n"
            "add element inet codespace dns_port6 { 2001:db8:1::10 . 443 timeout 7s }\n");
  EXPECT_EQ(ForgetCommand(port6), "delete element inet codespace dns_port6 { 2001:db8:1::10 . 443 }\n");
}

// The text is real nftables: load it into a throwaway namespace (root only), and the admissions
// too, then read the counter back.
TEST(RulesetLoadsTest, KernelAcceptsRulesetsAndAdmissions) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to load nftables rulesets";
  const std::string ns = "cs-test" + std::to_string(::getpid());
  auto fd = CreateNamedNetns(ns);
  ASSERT_OK(fd);
  Status s = RunInNetns(fd->get(), [&]() -> Status {
    ASSIGN_OR_RETURN(auto nft, Nftables::Open());
    RETURN_IF_ERROR(nft->Run(RunNamespaceRuleset(
        Firewall({"203.0.113.0/24", "198.51.100.2:8080", "2001:db8:1::10", "*.x.test:443"}, true))));
    RETURN_IF_ERROR(nft->Run(WorkerNatRuleset("codespace_t", "csth", AddressesForSlot(AddressPool::Default(), 0), true)));
    DnsAdmission a{*ParseIpAddress("203.0.113.10"), std::nullopt, 30};
    DnsAdmission b{*ParseIpAddress("2001:db8:1::10"), 443, 30};
    RETURN_IF_ERROR(nft->Run(AdmitCommand({a, b})));
    RETURN_IF_ERROR(nft->Run(ForgetCommand(a)));
    RETURN_IF_ERROR(nft->Run(AdmitCommand({a})));
    ASSIGN_OR_RETURN(uint64_t dropped, nft->CounterPackets("inet", kRunTable, kDroppedCounter));
    if (dropped != 0) return InternalError("fresh counter is not 0");
    Status bad = nft->Run("add rule inet codespace output bogus");
    if (bad.ok()) return InternalError("bogus rule accepted");
    if (bad.message().find("nft:") == std::string::npos) return InternalError(bad.message());
    return OkStatus();
  });
  EXPECT_OK(s);
  EXPECT_OK(DeleteNamedNetns(ns));
}

}  // namespace
}  // namespace codespace
