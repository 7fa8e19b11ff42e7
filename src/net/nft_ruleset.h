// The nftables rulesets of a filtered run, as text for libnftables. Pure: every rule that
// decides what a run can reach is pinned by a table test, and `nft -c` checks the text.
//
// The run's own table lives *inside the run's network namespace* (owned by the worker's user
// namespace, where the sandboxed process holds no capability, so it cannot edit it) and goes away
// with the namespace. The worker side holds only NAT and forwarding for the run's veth, in a
// table of its own named after the run, removed by name at teardown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "net/address_pool.h"
#include "net/rtnetlink.h"
#include "policy/egress_policy.h"

namespace codespace {

inline constexpr const char* kRunTable = "codespace";  // inet table inside the run's namespace
inline constexpr const char* kDroppedCounter = "dropped";
inline constexpr const char* kMetadataV4 = "169.254.169.254";
inline constexpr const char* kMetadataV6 = "fd00:ec2::254";

struct RunFirewall {
  std::vector<AllowlistEntry> allowlist;
  RunAddresses addresses;
  bool ipv6 = false;
  AddressPool pool;
  // Every address of the worker (all its interfaces): unreachable unless listed by address.
  std::vector<IpAddress> worker_addresses;
};

// `table inet codespace` for the run's namespace: output policy drop; loopback, established and
// related traffic, and DNS to the run's gate accepted; the metadata addresses, the worker's own
// addresses and the whole pool (other runs) dropped unless an entry lists that exact address;
// then the allowlist's addresses and CIDRs (TCP and UDP, on the entry's port or every port) and
// the sets the DNS gate fills; everything else counted in the `dropped` counter and dropped.
// ICMP is dropped except errors related to allowed flows (conntrack "related") and the IPv6
// neighbour discovery the link itself needs. Input accepts only replies and loopback.
std::string RunNamespaceRuleset(const RunFirewall& fw);

// The worker-side table for one run: "codespace_" + the run's 12 hex digits.
std::string WorkerTableName(const std::string& namespace_name);
// Masquerade of the run's addresses out of any interface but its own veth, and forwarding
// accepted from the veth (and replies to it).
std::string WorkerNatRuleset(const std::string& table, const std::string& worker_veth,
                             const RunAddresses& addresses, bool ipv6);

// An address the DNS gate admits, to reach for `timeout_seconds`.
struct DnsAdmission {
  IpAddress address;
  std::optional<uint16_t> port;  // nullopt: every port
  uint32_t timeout_seconds = 0;
};
// The set whose elements admit `a`, e.g. "dns_any4" or "dns_port6".
std::string AdmissionSet(const DnsAdmission& a);
// The element text, e.g. "203.0.113.10" or "203.0.113.10 . 443".
std::string AdmissionElement(const DnsAdmission& a);
// "add element inet codespace dns_any4 { 203.0.113.10 timeout 65s }\n" ...
std::string AdmitCommand(const std::vector<DnsAdmission>& admissions);
// "delete element ..." for one admission (refreshing an element's timeout = delete + add).
std::string ForgetCommand(const DnsAdmission& admission);

}  // namespace codespace
