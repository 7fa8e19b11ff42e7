// FakeInternet: the network the filtered-egress tests run against, so that no test ever sends a
// packet to the machine's real uplink.
//
// Two named network namespaces, linked only to each other by one veth pair:
//
//   worker host  (cst-<pid>-<seq>-w)          fake internet  (cst-<pid>-<seq>-i)
//   lo                                         lo: 203.0.113.{10,20,30,53,54}, 2001:db8:1::{10,20},
//   uplink0 198.51.100.2/24  <--- veth --->        169.254.169.254, fd00:ec2::254
//           2001:db8:100::2/64                 fi0 198.51.100.1/24, 2001:db8:100::1/64
//   default via 198.51.100.1 / 2001:db8:100::1 (no default route: it answers, it never forwards)
//
// Both ends of the veth have fixed link addresses and know each other's as permanent neighbours
// (no ARP or neighbour discovery on the link); no address goes through duplicate address
// detection. Several FakeInternets may coexist, in one process or many.
//
// The worker under test runs in the worker host (RunInWorkerHost, WorkerHostArgv). Its only
// uplink leads to the fake internet, which has no link anywhere else: whatever a run does, its
// packets end in namespaces this object owns. The fake internet's servers are threads of the test
// process serving sockets created inside the fake internet namespace:
//
//   every server address (kAllowed*, kDenied*, kWildV4, kDnsServerV4, kOtherResolverV4):
//     TCP 80 and 8080: HTTP/1.0 200 OK, body "fake-internet <addr>:<port>\n" ([v6]:port for v6)
//     TCP 7: echo; UDP 7: echo
//   kMetadataV4, kMetadataV6: TCP 80 HTTP, body "fake-internet <addr>:80\n"
//   kDnsServerV4 UDP+TCP 53: authoritative for the zone below, NXDOMAIN for anything else
//   kOtherResolverV4 UDP+TCP 53: the same zone, and every other name A 203.0.113.20 /
//     AAAA 2001:db8:1::20 (so a run that reaches it directly gets an answer)
//
// Zone (TTL 60 unless said): allowed.test A 203.0.113.10, AAAA 2001:db8:1::10;
//   denied.test A 203.0.113.20, AAAA 2001:db8:1::20; *.wild.test A 203.0.113.30 (any depth:
//   api.wild.test, x.y.wild.test); alias.test CNAME allowed.test (answers carry the CNAME and
//   allowed.test's records); short.test A 203.0.113.10 TTL 2. A name that exists without the
//   asked type gets NOERROR with no answers.
//
// The worker's own service: TCP listeners in the worker host on 0.0.0.0:kWorkerServicePort,
// [::]:kWorkerServicePort and 127.0.0.1:kWorkerLoopbackServicePort (HTTP, body
// "worker-host <addr>:<port>\n"). A filtered run must reach none of them.
//
// Everything is removed by the destructor (or TearDown), also after a failed Create: server
// threads stopped and joined, sockets closed, processes left in the namespaces killed, the
// namespaces deleted (their veths die with them; no veth ever exists in the root namespace).
// Create first removes the namespaces of harness processes that are no longer alive.
// Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and `ip`, `nsenter`, `unshare`, `mount`.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/process.h"
#include "base/status.h"

namespace codespace::lanes {

// The worker host's uplink and the fake internet's side of it.
inline constexpr char kWorkerUplinkInterface[] = "uplink0";
inline constexpr char kInternetInterface[] = "fi0";
inline constexpr char kWorkerUplinkV4[] = "198.51.100.2";
inline constexpr char kWorkerUplinkV6[] = "2001:db8:100::2";
inline constexpr char kInternetGatewayV4[] = "198.51.100.1";
inline constexpr char kInternetGatewayV6[] = "2001:db8:100::1";
inline constexpr int kUplinkPrefixV4 = 24;
inline constexpr int kUplinkPrefixV6 = 64;

// Servers in the fake internet.
inline constexpr char kAllowedV4[] = "203.0.113.10";
inline constexpr char kAllowedV6[] = "2001:db8:1::10";
inline constexpr char kDeniedV4[] = "203.0.113.20";
inline constexpr char kDeniedV6[] = "2001:db8:1::20";
inline constexpr char kWildV4[] = "203.0.113.30";
inline constexpr char kDnsServerV4[] = "203.0.113.53";
inline constexpr char kOtherResolverV4[] = "203.0.113.54";
inline constexpr char kMetadataV4[] = "169.254.169.254";
inline constexpr char kMetadataV6[] = "fd00:ec2::254";

inline constexpr int kHttpPort = 80;
inline constexpr int kHttpAltPort = 8080;
inline constexpr int kEchoPort = 7;  // TCP and UDP
inline constexpr int kDnsPort = 53;  // UDP and TCP

// The worker host's own services.
inline constexpr int kWorkerServicePort = 8800;          // 0.0.0.0 and [::]
inline constexpr int kWorkerLoopbackServicePort = 8801;  // 127.0.0.1

// The zone.
inline constexpr char kAllowedName[] = "allowed.test";    // kAllowedV4, kAllowedV6
inline constexpr char kDeniedName[] = "denied.test";      // kDeniedV4, kDeniedV6
inline constexpr char kWildApiName[] = "api.wild.test";   // kWildV4 (*.wild.test)
inline constexpr char kWildDeepName[] = "x.y.wild.test";  // kWildV4 (*.wild.test)
inline constexpr char kAliasName[] = "alias.test";        // CNAME kAllowedName
inline constexpr char kShortTtlName[] = "short.test";     // kAllowedV4, TTL kShortTtl
inline constexpr uint32_t kDefaultTtl = 60;
inline constexpr uint32_t kShortTtl = 2;

// A DNS question one of the fake resolvers received.
struct DnsQuerySeen {
  std::string server;  // kDnsServerV4 or kOtherResolverV4
  std::string name;    // lower case, no trailing dot
  uint16_t type = 0;   // 1 A, 28 AAAA, 5 CNAME, ...
  bool tcp = false;
  std::string peer;  // the client's address
};

// An HTTP request one of the servers (fake internet or worker service) answered.
struct HttpRequestSeen {
  std::string server;  // the local address it arrived at, e.g. "203.0.113.10", "2001:db8:1::10"
  int port = 0;
  std::string peer;          // the client's address
  std::string request_line;  // "GET / HTTP/1.0"
};

// Any contact: an accepted TCP connection or a UDP datagram, on any service (DNS included).
struct ContactSeen {
  std::string server;  // the local address
  int port = 0;
  bool tcp = true;
  std::string peer;
};

// How a command run in the worker host sees /etc/resolv.conf.
enum class WorkerResolvConf {
  // "nameserver 203.0.113.53", bind-mounted over /etc/resolv.conf in a private mount namespace
  // (propagation slave: nothing mounted inside, named namespaces included, shows outside).
  kFakeDns,
  // The machine's own /etc/resolv.conf and mount namespace (what a worker that creates named
  // namespaces needs). Its nameserver is unreachable from the worker host: point the worker's
  // upstream resolver at kDnsServerV4 by other means.
  kHost,
};

struct FakeInternetOptions {
  // Test seam: Create fails as if the step named so had failed, after every earlier step ran.
  // Step names are those that prefix Create's errors (e.g. "add veth", "start servers").
  std::string fail_at_step;
};

class FakeInternet {
 public:
  // Builds the topology and starts the servers. Removes stale harness namespaces first.
  static Result<std::unique_ptr<FakeInternet>> Create(FakeInternetOptions options = {});

  FakeInternet(const FakeInternet&) = delete;
  FakeInternet& operator=(const FakeInternet&) = delete;
  ~FakeInternet();

  // Stops the servers and removes both namespaces. Idempotent; the destructor calls it.
  [[nodiscard]] Status TearDown();

  const std::string& worker_host_netns() const { return worker_ns_; }
  const std::string& internet_netns() const { return internet_ns_; }
  std::string worker_host_netns_path() const;
  std::string internet_netns_path() const;
  // A resolv.conf naming kDnsServerV4 (what kFakeDns binds over /etc/resolv.conf).
  const std::string& resolv_conf_path() const { return resolv_conf_; }

  // `argv` wrapped to run in the worker host's network namespace (nsenter --net=...), for
  // Spawn-ing long-lived processes such as the worker itself. The caller owns what it spawns.
  std::vector<std::string> WorkerHostArgv(
      std::vector<std::string> argv, WorkerResolvConf resolv = WorkerResolvConf::kFakeDns) const;

  // Runs `argv` to completion in the worker host, stdout and stderr captured together.
  // `env` nullopt inherits the test's environment.
  Result<CommandOutput> RunInWorkerHost(std::vector<std::string> argv,
                                        std::optional<std::vector<std::string>> env = std::nullopt,
                                        WorkerResolvConf resolv = WorkerResolvConf::kFakeDns) const;

  // Writes the worker host's net.ipv4.ip_forward and net.ipv6.conf.all.forwarding and reads them
  // back. A new namespace starts with IPv4 forwarding copied from the machine's and IPv6 off.
  [[nodiscard]] Status SetWorkerHostForwarding(bool on) const;

  // What the servers saw, in arrival order. Thread-safe.
  std::vector<DnsQuerySeen> DnsQueries() const;
  // The names asked of `server` (kDnsServerV4 or kOtherResolverV4), in order, repeats kept.
  std::vector<std::string> NamesQueriedAt(std::string_view server) const;
  std::vector<HttpRequestSeen> HttpRequests() const;
  std::vector<HttpRequestSeen> HttpRequestsTo(std::string_view server) const;
  std::vector<ContactSeen> Contacts() const;
  // Contacts at server:port (any protocol).
  int ContactsAt(std::string_view server, int port) const;
  void ClearObservations();

 private:
  struct Observations;
  class ServerLoop;

  FakeInternet();
  Status Build(const FakeInternetOptions& options);
  Status StartServers();

  std::string worker_ns_;
  std::string internet_ns_;
  std::string scratch_dir_;  // /tmp/cst-<pid>-<seq>-etc.XXXXXX
  std::string resolv_conf_;
  std::string nsenter_, unshare_, mount_;  // absolute paths
  std::shared_ptr<Observations> observations_;
  std::unique_ptr<ServerLoop> loop_;
  bool torn_down_ = false;
};

}  // namespace codespace::lanes
