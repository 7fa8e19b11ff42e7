// FilteredEgressNetns: the network of one filtered run, made and removed in-process.
//
// Setup, each step named for the abort reason ("Filtered-egress netns setup failed: <step>:
// <cause>") and undone by teardown if a later one fails:
//   create namespace       /run/netns/<name>, as admission predicted
//   allocate addresses     a free slot of the pool (under a lock shared by all workers)
//   create veth            <name-derived>h on the worker side, eth0 inside the run's namespace
//   configure worker side  the slot's .1 (and ::1) on the worker's veth, up
//   configure run side     lo and eth0 up, the slot's .2 (and ::2), default routes via the worker
//   enable forwarding      write 1 to ip_forward only if it reads 0, then read it back: the write's
//                          success is not trusted (procps' sysctl warns and exits 0 on failure)
//   worker nat             table inet codespace_<id>: masquerade out of the uplink, forwarding
//   run firewall           table inet codespace inside the run's namespace (nft_ruleset.h)
//   dns gate               the run's resolver on the worker side of its veth (dns_gate.h)
// No process is spawned for any of it: netlink (libmnl) and libnftables, in this process.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "net/address_pool.h"
#include "net/dns_gate.h"
#include "net/nftables.h"
#include "net/rtnetlink.h"
#include "policy/egress_policy.h"
#include "run/network_report.h"

namespace codespace {

enum class SetupStep {
  kCreateNamespace,
  kAllocateAddresses,
  kCreateVeth,
  kConfigureWorkerSide,
  kConfigureRunSide,
  kEnableForwarding,
  kWorkerNat,
  kRunFirewall,
  kDnsGate,
};
inline constexpr SetupStep kAllSetupSteps[] = {
    SetupStep::kCreateNamespace,     SetupStep::kAllocateAddresses, SetupStep::kCreateVeth,
    SetupStep::kConfigureWorkerSide, SetupStep::kConfigureRunSide,  SetupStep::kEnableForwarding,
    SetupStep::kWorkerNat,           SetupStep::kRunFirewall,       SetupStep::kDnsGate};
std::string_view SetupStepName(SetupStep step);

struct FilteredNetnsConfig {
  std::string run_id;
  std::string namespace_name;  // from admission: NamespaceNameForRun(run_id)
  std::vector<AllowlistEntry> allowlist;
  AddressPool pool = AddressPool::Default();
  // Where allowed names are resolved. Empty: the first nameserver of /etc/resolv.conf.
  std::string upstream_dns;
  std::string ipv4_forwarding_path = "/proc/sys/net/ipv4/ip_forward";
  // Called with each refused DNS name (the caller logs it with the run id).
  std::function<void(std::string_view name)> on_refused;
  // Test seam: called before each step; a non-OK status fails that step with that cause.
  std::function<Status(SetupStep)> before_step;
};

class FilteredEgressNetns {
 public:
  // Builds the run's network. On failure everything made so far is torn down and the status
  // reads "Filtered-egress netns setup failed: <step>: <cause>".
  static Result<std::unique_ptr<FilteredEgressNetns>> Setup(FilteredNetnsConfig config);
  ~FilteredEgressNetns();  // Teardown(), errors logged to stderr

  FilteredEgressNetns(const FilteredEgressNetns&) = delete;
  FilteredEgressNetns& operator=(const FilteredEgressNetns&) = delete;

  int netns_fd() const { return netns_fd_.get(); }
  const std::string& namespace_name() const { return config_.namespace_name; }
  const RunAddresses& addresses() const { return addresses_; }
  bool ipv6() const { return ipv6_; }
  const std::string& worker_veth() const { return worker_veth_; }
  // A resolv.conf naming the run's DNS gate, to bind over /etc/resolv.conf inside the run.
  const std::string& resolv_conf_path() const { return resolv_conf_path_; }

  // The report so far (the drop counter is read now; after Quiesce, its last value).
  NetworkReport Report();
  // Once the run's processes are gone: stops the DNS gate and reads the drop counter for the
  // last time, leaving the namespace, veth and tables for Teardown. Idempotent.
  void Quiesce();
  // Stops the gate and removes the namespace, veth, tables and files. Idempotent.
  Status Teardown();

  // Removes everything a run named `namespace_name` may have left, by name alone — after a
  // crash, or at worker start for runs that have finished. Keyed on the tools, never on
  // CanFilter: a host that can no longer filter must still clean up.
  static Status TearDownNamespaceByName(const std::string& namespace_name);

  // Names derived from the namespace name.
  static std::string WorkerVethName(const std::string& namespace_name);  // "cs<12 hex>h"
  static std::string RunDir(const std::string& namespace_name);          // /run/codespace/<name>

 private:
  explicit FilteredEgressNetns(FilteredNetnsConfig config) : config_(std::move(config)) {}
  Status RunSteps();
  Status StartGate();

  FilteredNetnsConfig config_;
  UniqueFd worker_netns_fd_;  // the namespace Setup ran in: teardown's worker side is there
  UniqueFd netns_fd_;
  RunAddresses addresses_;
  bool ipv6_ = false;
  std::string worker_veth_;
  std::string resolv_conf_path_;
  std::unique_ptr<Nftables> run_nft_;  // bound to the run's namespace
  std::unique_ptr<DnsGate> gate_;
  bool quiesced_ = false;
  bool torn_down_ = false;
  // Set once this object created the namespace: a setup that failed because the name was taken
  // must not tear down, by that name, another run's network.
  bool owns_name_ = false;
  uint64_t final_dropped_ = 0;
  struct Journal;
  std::shared_ptr<Journal> journal_;  // admitted / refused, filled from the gate's thread
};

}  // namespace codespace
