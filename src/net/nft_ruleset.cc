#include "net/nft_ruleset.h"

#include <sys/socket.h>

#include <fmt/format.h>

namespace codespace {

namespace {

bool IsV4(const AllowlistEntry& e) { return e.family == AF_INET; }

std::string EntryTarget(const AllowlistEntry& e) {
  if (e.kind == AllowlistEntry::Kind::kCidr) return fmt::format("{}/{}", e.host, e.prefix_length);
  return e.host;
}

std::string EntryRule(const AllowlistEntry& e) {
  std::string port = e.port ? fmt::format(" th dport {}", *e.port) : "";
  return fmt::format("    {} daddr {} meta l4proto {{ tcp, udp }}{} accept\n",
                     IsV4(e) ? "ip" : "ip6", EntryTarget(e), port);
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

}  // namespace

std::string RunNamespaceRuleset(const RunFirewall& fw) {
  const RunAddresses& a = fw.addresses;
  std::vector<std::string> blocked4 = {kMetadataV4, fw.pool.v4_cidr()};
  std::vector<std::string> blocked6 = {kMetadataV6, fw.pool.v6_cidr()};
  for (const auto& w : fw.worker_addresses) {
    (w.family == AF_INET ? blocked4 : blocked6).push_back(w.ToString());
  }
  std::string r;
  r += fmt::format("table inet {} {{\n", kRunTable);
  r += fmt::format("  counter {} {{ }}\n", kDroppedCounter);
  // auto-merge: worker addresses may overlap the pool (the worker side of this very veth).
  r += fmt::format("  set blocked4 {{ type ipv4_addr; flags interval; auto-merge; elements = {{ {} }} }}\n",
                   Join(blocked4));
  r += fmt::format("  set blocked6 {{ type ipv6_addr; flags interval; auto-merge; elements = {{ {} }} }}\n",
                   Join(blocked6));
  r += "  set dns_any4 { type ipv4_addr; flags timeout; }\n";
  r += "  set dns_any6 { type ipv6_addr; flags timeout; }\n";
  r += "  set dns_port4 { type ipv4_addr . inet_service; flags timeout; }\n";
  r += "  set dns_port6 { type ipv6_addr . inet_service; flags timeout; }\n";

  r += "  chain output {\n";
  r += "    type filter hook output priority filter; policy drop;\n";
  r += "    oif \"lo\" accept\n";
  r += "    ct state established,related accept\n";
  r += fmt::format("    ip daddr {} meta l4proto {{ tcp, udp }} th dport 53 accept\n",
                   a.worker_v4.ToString());
  if (fw.ipv6) {
    r += fmt::format("    ip6 daddr {} meta l4proto {{ tcp, udp }} th dport 53 accept\n",
                     a.worker_v6.ToString());
    // Neighbour discovery with the worker side of the link, and nothing beyond it.
    r += fmt::format(
        "    icmpv6 type {{ nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit }} "
        "ip6 daddr {{ fe80::/10, ff02::/16, {} }} accept\n",
        a.worker_v6.ToString());
  }
  // Listed by address: reachable even when it is the worker's or the metadata service's.
  for (const auto& e : fw.allowlist) {
    if (e.kind == AllowlistEntry::Kind::kAddress && (IsV4(e) || fw.ipv6)) r += EntryRule(e);
  }
  r += fmt::format("    ip daddr @blocked4 counter name {} drop\n", kDroppedCounter);
  r += fmt::format("    ip6 daddr @blocked6 counter name {} drop\n", kDroppedCounter);
  for (const auto& e : fw.allowlist) {
    if (e.kind == AllowlistEntry::Kind::kCidr && (IsV4(e) || fw.ipv6)) r += EntryRule(e);
  }
  r += "    ip daddr @dns_any4 meta l4proto { tcp, udp } accept\n";
  r += "    meta l4proto { tcp, udp } ip daddr . th dport @dns_port4 accept\n";
  if (fw.ipv6) {
    r += "    ip6 daddr @dns_any6 meta l4proto { tcp, udp } accept\n";
    r += "    meta l4proto { tcp, udp } ip6 daddr . th dport @dns_port6 accept\n";
  }
  r += fmt::format("    counter name {} drop\n", kDroppedCounter);
  r += "  }\n";

  r += "  chain input {\n";
  r += "    type filter hook input priority filter; policy drop;\n";
  r += "    iif \"lo\" accept\n";
  r += "    ct state established,related accept\n";
  if (fw.ipv6) {
    r += "    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-advert } accept\n";
  }
  r += "  }\n";
  r += "}\n";
  return r;
}

std::string WorkerTableName(const std::string& namespace_name) {
  std::string id = namespace_name.rfind("cs-", 0) == 0 ? namespace_name.substr(3) : namespace_name;
  return "codespace_" + id;
}

std::string WorkerNatRuleset(const std::string& table, const std::string& veth,
                             const RunAddresses& a, bool ipv6) {
  std::string r = fmt::format("table inet {} {{\n", table);
  r += "  chain postrouting {\n";
  r += "    type nat hook postrouting priority srcnat; policy accept;\n";
  r += fmt::format("    ip saddr {}/{} oifname != \"{}\" masquerade\n", a.run_v4.ToString(),
                   RunAddresses::kV4Prefix, veth);
  if (ipv6) {
    r += fmt::format("    ip6 saddr {}/{} oifname != \"{}\" masquerade\n", a.run_v6.ToString(),
                     RunAddresses::kV6Prefix, veth);
  }
  r += "  }\n";
  r += "  chain forward {\n";
  r += "    type filter hook forward priority filter; policy accept;\n";
  r += fmt::format("    iifname \"{}\" accept\n", veth);
  r += fmt::format("    oifname \"{}\" ct state established,related accept\n", veth);
  r += fmt::format("    oifname \"{}\" drop\n", veth);
  r += "  }\n";
  r += "}\n";
  return r;
}

std::string AdmissionSet(const DnsAdmission& a) {
  bool v4 = a.address.family == AF_INET;
  return fmt::format("dns_{}{}", a.port ? "port" : "any", v4 ? "4" : "6");
}

std::string AdmissionElement(const DnsAdmission& a) {
  if (a.port) return fmt::format("{} . {}", a.address.ToString(), *a.port);
  return a.address.ToString();
}

std::string AdmitCommand(const std::vector<DnsAdmission>& admissions) {
  std::string out;
  for (const auto& a : admissions) {
    out += fmt::format("add element inet {} {} {{ {} timeout {}s }}\n", kRunTable, AdmissionSet(a),
                       AdmissionElement(a), a.timeout_seconds ? a.timeout_seconds : 1);
  }
  return out;
}

std::string ForgetCommand(const DnsAdmission& a) {
  return fmt::format("delete element inet {} {} {{ {} }}\n", kRunTable, AdmissionSet(a),
                     AdmissionElement(a));
}

}  // namespace codespace
