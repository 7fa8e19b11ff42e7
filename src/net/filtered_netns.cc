#include "net/filtered_netns.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <functional>
#include <mutex>

#include "base/file_util.h"
#include "net/dns_gate.h"
#include "net/netns.h"
#include "net/nft_ruleset.h"
#include "net/nftables.h"

namespace codespace {

std::string_view SetupStepName(SetupStep step) {
  switch (step) {
    case SetupStep::kCreateNamespace:
      return "create namespace";
    case SetupStep::kAllocateAddresses:
      return "allocate addresses";
    case SetupStep::kCreateVeth:
      return "create veth";
    case SetupStep::kConfigureWorkerSide:
      return "configure worker side";
    case SetupStep::kConfigureRunSide:
      return "configure run side";
    case SetupStep::kEnableForwarding:
      return "enable forwarding";
    case SetupStep::kWorkerNat:
      return "worker nat";
    case SetupStep::kRunFirewall:
      return "run firewall";
    case SetupStep::kDnsGate:
      return "dns gate";
  }
  return "?";
}

struct FilteredEgressNetns::Journal {
  std::mutex mu;
  std::vector<std::string> admitted;
  std::vector<std::string> refused;
};

namespace {

constexpr const char* kRunStateRoot = "/run/codespace";
constexpr uint32_t kAdmissionGraceSeconds = 5;

// Serialises slot allocation between every worker on the host: the kernel's own list of
// addresses is the allocation table, and the lock makes "find free, then take it" atomic.
class PoolLock {
 public:
  static Result<PoolLock> Acquire() {
    RETURN_IF_ERROR(MakeDirs(kRunStateRoot, 0755));
    std::string path = fmt::format("{}/pool.lock", kRunStateRoot);
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path.c_str(), O_RDWR | O_CREAT, 0600));
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return ErrnoError(fmt::format("flock({})", path), errno);
    }
    return PoolLock(std::move(fd));
  }

 private:
  explicit PoolLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing it releases the lock
};

uint32_t HashRunId(const std::string& id) {
  uint32_t h = 2166136261u;
  for (char c : id) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

Result<std::string> UpstreamFromResolvConf() {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString("/etc/resolv.conf"));
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("nameserver", 0) != 0) continue;
    size_t a = line.find_first_not_of(" \t", 10);
    if (a == std::string::npos) continue;
    size_t b = line.find_first_of(" \t#", a);
    return line.substr(a, b == std::string::npos ? std::string::npos : b - a);
  }
  return NotFoundError("/etc/resolv.conf names no nameserver (set CODESPACE_DNS_UPSTREAM)");
}

std::string AdmittedText(const AdmittedAddress& a) {
  IpAddress ip;
  ip.family = a.family;
  ip.bytes = a.bytes;
  std::string addr = a.family == AF_INET6 ? "[" + ip.ToString() + "]" : ip.ToString();
  return a.port ? fmt::format("{} {}:{}", a.name, addr, *a.port)
                : fmt::format("{} {}", a.name, addr);
}

}  // namespace

std::string FilteredEgressNetns::WorkerVethName(const std::string& namespace_name) {
  std::string id = namespace_name.rfind("cs-", 0) == 0 ? namespace_name.substr(3) : namespace_name;
  if (id.size() > 12) id.resize(12);
  return "cs" + id + "h";
}

std::string FilteredEgressNetns::RunDir(const std::string& namespace_name) {
  return fmt::format("{}/{}", kRunStateRoot, namespace_name);
}

Result<std::unique_ptr<FilteredEgressNetns>> FilteredEgressNetns::Setup(
    FilteredNetnsConfig config) {
  std::unique_ptr<FilteredEgressNetns> n(new FilteredEgressNetns(std::move(config)));
  n->journal_ = std::make_shared<Journal>();
  Status s = n->RunSteps();
  if (!s.ok()) {
    Status down = n->Teardown();
    std::string msg = "Filtered-egress netns setup failed: " + s.message();
    if (!down.ok()) msg += fmt::format(" (and teardown: {})", down.message());
    return Status(s.code(), msg);
  }
  return n;
}

Status FilteredEgressNetns::RunSteps() {
  auto step = [&](SetupStep st, const std::function<Status()>& body) -> Status {
    Status s = config_.before_step ? config_.before_step(st) : OkStatus();
    if (s.ok()) s = body();
    return s.WithContext(SetupStepName(st));
  };
  const std::string& name = config_.namespace_name;
  worker_veth_ = WorkerVethName(name);
  ASSIGN_OR_RETURN(worker_netns_fd_, OpenFile("/proc/thread-self/ns/net", O_RDONLY));

  RETURN_IF_ERROR(step(SetupStep::kCreateNamespace, [&]() -> Status {
    ASSIGN_OR_RETURN(netns_fd_, CreateNamedNetns(name));
    owns_name_ = true;
    RETURN_IF_ERROR(MakeDirs(RunDir(name), 0755));
    return OkStatus();
  }));

  // The worker's own rtnetlink socket (this thread's namespace: the worker's).
  std::unique_ptr<Rtnetlink> worker_rt;
  std::optional<PoolLock> lock;
  RETURN_IF_ERROR(step(SetupStep::kAllocateAddresses, [&]() -> Status {
    ASSIGN_OR_RETURN(worker_rt, Rtnetlink::Open());
    ASSIGN_OR_RETURN(PoolLock l, PoolLock::Acquire());
    lock.emplace(std::move(l));
    ASSIGN_OR_RETURN(auto addrs, worker_rt->ListAddresses());
    std::vector<uint32_t> taken;
    for (const auto& a : addrs) {
      int64_t slot = SlotOfAddress(config_.pool, a.address);
      if (slot >= 0) taken.push_back(static_cast<uint32_t>(slot));
    }
    ASSIGN_OR_RETURN(uint32_t slot, PickFreeSlot(config_.pool, taken, HashRunId(config_.run_id)));
    addresses_ = AddressesForSlot(config_.pool, slot);
    // IPv6 only where the worker has it: a default route, and forwarding already on (turning
    // IPv6 forwarding on would stop a host accepting router advertisements).
    ASSIGN_OR_RETURN(bool v6_route, worker_rt->HasDefaultRoute(AF_INET6));
    auto v6_fwd = ReadFileToString("/proc/sys/net/ipv6/conf/all/forwarding");
    ipv6_ = v6_route && v6_fwd.ok() && !v6_fwd->empty() && (*v6_fwd)[0] == '1';
    return OkStatus();
  }));

  RETURN_IF_ERROR(step(SetupStep::kCreateVeth, [&]() -> Status {
    return worker_rt->CreateVethPair(worker_veth_, "eth0", netns_fd_.get());
  }));

  RETURN_IF_ERROR(step(SetupStep::kConfigureWorkerSide, [&]() -> Status {
    ASSIGN_OR_RETURN(int idx, worker_rt->LinkIndex(worker_veth_));
    RETURN_IF_ERROR(worker_rt->AddAddress(idx, addresses_.worker_v4, RunAddresses::kV4Prefix));
    if (ipv6_) {
      RETURN_IF_ERROR(worker_rt->AddAddress(idx, addresses_.worker_v6, RunAddresses::kV6Prefix));
    }
    RETURN_IF_ERROR(worker_rt->SetLinkUp(idx));
    lock.reset();  // the slot is visible to every other worker now
    return OkStatus();
  }));

  RETURN_IF_ERROR(step(SetupStep::kConfigureRunSide, [&]() -> Status {
    return RunInNetns(netns_fd_.get(), [&]() -> Status {
      ASSIGN_OR_RETURN(auto rt, Rtnetlink::Open());
      ASSIGN_OR_RETURN(int lo, rt->LinkIndex("lo"));
      RETURN_IF_ERROR(rt->SetLinkUp(lo));
      ASSIGN_OR_RETURN(int eth, rt->LinkIndex("eth0"));
      RETURN_IF_ERROR(rt->AddAddress(eth, addresses_.run_v4, RunAddresses::kV4Prefix));
      if (ipv6_) RETURN_IF_ERROR(rt->AddAddress(eth, addresses_.run_v6, RunAddresses::kV6Prefix));
      RETURN_IF_ERROR(rt->SetLinkUp(eth));
      RETURN_IF_ERROR(rt->AddDefaultRoute(addresses_.worker_v4));
      if (ipv6_) RETURN_IF_ERROR(rt->AddDefaultRoute(addresses_.worker_v6));
      return OkStatus();
    });
  }));

  RETURN_IF_ERROR(step(SetupStep::kEnableForwarding, [&]() -> Status {
    const std::string& path = config_.ipv4_forwarding_path;
    ASSIGN_OR_RETURN(std::string before, ReadFileToString(path));
    if (!before.empty() && before[0] == '1') return OkStatus();
    {
      auto fd = OpenFile(path.c_str(), O_WRONLY);
      if (fd.ok()) WriteAll(fd->get(), "1\n").IgnoreError();  // judged by the read-back below
    }
    ASSIGN_OR_RETURN(std::string after, ReadFileToString(path));
    if (after.empty() || after[0] != '1') {
      return FailedPreconditionError(fmt::format("{} still reads \"{}\" after writing 1", path,
                                                 after.substr(0, after.find('\n'))));
    }
    return OkStatus();
  }));

  RETURN_IF_ERROR(step(SetupStep::kWorkerNat, [&]() -> Status {
    ASSIGN_OR_RETURN(auto nft, Nftables::Open());
    return nft->Run(WorkerNatRuleset(WorkerTableName(name), worker_veth_, addresses_, ipv6_));
  }));

  RETURN_IF_ERROR(step(SetupStep::kRunFirewall, [&]() -> Status {
    RunFirewall fw;
    fw.allowlist = config_.allowlist;
    fw.addresses = addresses_;
    fw.ipv6 = ipv6_;
    fw.pool = config_.pool;
    ASSIGN_OR_RETURN(auto addrs, worker_rt->ListAddresses());
    for (const auto& a : addrs) fw.worker_addresses.push_back(a.address);
    // The context stays bound to the run's namespace: the gate adds admissions through it.
    Status opened = RunInNetns(netns_fd_.get(), [&]() -> Status {
      ASSIGN_OR_RETURN(run_nft_, Nftables::Open());
      return OkStatus();
    });
    RETURN_IF_ERROR(opened);
    return run_nft_->Run(RunNamespaceRuleset(fw));
  }));

  RETURN_IF_ERROR(step(SetupStep::kDnsGate, [&]() -> Status { return StartGate(); }));
  return OkStatus();
}

Status FilteredEgressNetns::StartGate() {
  std::string upstream = config_.upstream_dns;
  if (upstream.empty()) {
    ASSIGN_OR_RETURN(upstream, UpstreamFromResolvConf());
  }
  DnsGateConfig g;
  g.run_id = config_.run_id;
  g.allowlist = config_.allowlist;
  g.listen.push_back(DnsEndpoint{addresses_.worker_v4.ToString(), 53});
  if (ipv6_) g.listen.push_back(DnsEndpoint{addresses_.worker_v6.ToString(), 53});
  // "ADDRESS" or "ADDRESS#PORT" (dnsmasq's way of naming a port; tests use it).
  size_t hash = upstream.find('#');
  g.upstream.address = upstream.substr(0, hash);
  if (hash != std::string::npos)
    g.upstream.port = static_cast<uint16_t>(std::stoi(upstream.substr(hash + 1)));
  Nftables* nft = run_nft_.get();
  std::shared_ptr<Journal> journal = journal_;
  g.admit = [nft, journal](const std::vector<AdmittedAddress>& admitted) -> Status {
    std::vector<DnsAdmission> adds;
    for (const auto& a : admitted) {
      DnsAdmission d;
      d.address.family = a.family;
      d.address.bytes = a.bytes;
      d.port = a.port;
      d.timeout_seconds = a.ttl + kAdmissionGraceSeconds;
      // Refresh: an element already in the set keeps its old timeout on "add".
      nft->Run(ForgetCommand(d)).IgnoreError();
      adds.push_back(d);
    }
    if (!adds.empty()) RETURN_IF_ERROR(nft->Run(AdmitCommand(adds)));
    std::lock_guard<std::mutex> l(journal->mu);
    for (const auto& a : admitted) {
      std::string text = AdmittedText(a);
      bool seen = false;
      for (const auto& e : journal->admitted) seen |= e == text;
      if (!seen) journal->admitted.push_back(text);
    }
    return OkStatus();
  };
  auto on_refused = config_.on_refused;
  g.on_refused = [journal, on_refused](std::string_view name, uint16_t) {
    {
      std::lock_guard<std::mutex> l(journal->mu);
      bool seen = false;
      for (const auto& e : journal->refused) seen |= e == name;
      if (!seen) journal->refused.emplace_back(name);
    }
    if (on_refused) on_refused(name);
  };
  ASSIGN_OR_RETURN(gate_, DnsGate::Start(std::move(g)));

  resolv_conf_path_ = RunDir(config_.namespace_name) + "/resolv.conf";
  std::string conf = fmt::format("nameserver {}\n", addresses_.worker_v4.ToString());
  if (ipv6_) conf += fmt::format("nameserver {}\n", addresses_.worker_v6.ToString());
  // No fsync: the file lives as long as the run's namespace, which no crash of the machine
  // survives (the start-up sweep removes what one leaves). ~1 ms of a filtered run's setup.
  return ReplaceFileForThisBoot(resolv_conf_path_, conf, 0644);
}

NetworkReport FilteredEgressNetns::Report() {
  NetworkReport r;
  {
    std::lock_guard<std::mutex> l(journal_->mu);
    r.dns_admitted = journal_->admitted;
    r.dns_refused = journal_->refused;
  }
  r.dropped_packets = final_dropped_;
  if (!quiesced_ && run_nft_) {
    auto n = run_nft_->CounterPackets("inet", kRunTable, kDroppedCounter);
    if (n.ok()) r.dropped_packets = *n;
  }
  return r;
}

void FilteredEgressNetns::Quiesce() {
  if (quiesced_) return;
  if (gate_) gate_->Stop();
  if (run_nft_) {
    auto n = run_nft_->CounterPackets("inet", kRunTable, kDroppedCounter);
    if (n.ok()) final_dropped_ = *n;
  }
  gate_.reset();
  run_nft_.reset();
  quiesced_ = true;
}

Status FilteredEgressNetns::Teardown() {
  if (torn_down_) return OkStatus();
  Quiesce();
  netns_fd_.reset();
  torn_down_ = true;
  if (!owns_name_) return OkStatus();
  if (!worker_netns_fd_) return TearDownNamespaceByName(config_.namespace_name);
  // The worker side (veth, NAT table) lives where Setup ran, whichever thread tears down.
  return RunInNetns(worker_netns_fd_.get(),
                    [&] { return TearDownNamespaceByName(config_.namespace_name); });
}

FilteredEgressNetns::~FilteredEgressNetns() {
  Status s = Teardown();
  if (!s.ok())
    std::fprintf(stderr, "codespace: teardown of %s: %s\n", config_.namespace_name.c_str(),
                 s.message().c_str());
}

Status FilteredEgressNetns::TearDownNamespaceByName(const std::string& name) {
  // Every step runs even when one fails; the first error is reported.
  Status first;
  auto keep = [&](Status s) {
    if (!s.ok() && first.ok()) first = s;
  };
  if (auto nft = Nftables::Open(); nft.ok()) {
    Status s = (*nft)->Run(fmt::format("delete table inet {}", WorkerTableName(name)));
    if (!s.ok() && s.message().find("No such file or directory") == std::string::npos) keep(s);
  } else {
    keep(nft.status());
  }
  if (auto rt = Rtnetlink::Open(); rt.ok()) {
    Status s = (*rt)->DeleteLink(WorkerVethName(name));
    if (s.code() != StatusCode::kNotFound) keep(s);
  } else {
    keep(rt.status());
  }
  keep(DeleteNamedNetns(name));
  keep(RemoveTree(RunDir(name)));
  return first.WithContext(fmt::format("tear down {}", name));
}

}  // namespace codespace
