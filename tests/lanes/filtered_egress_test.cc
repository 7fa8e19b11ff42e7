// Filtered egress, end to end: the real codespace binary runs as the worker inside the fake
// internet's "worker host" namespace, and escape_probe, inside each filtered run, tries one
// thing — exiting 0 when the wall held and its own code when a forbidden action worked.
// Nothing here reaches past the namespaces the harness made.
#include <fmt/format.h>

#include <set>
#include <thread>

#include "base/file_util.h"
#include "harness/fake_internet.h"
#include "lanes/fake_internet_lane.h"
#include "supervisor/run_dir.h"

namespace codespace::lanes {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// The run's allowlist in these tests.
const std::vector<std::string> kAllow = {
    "allowed.test",          // a name: its answered addresses, every port
    "*.wild.test:80",        // a wildcard with a port
    "203.0.113.20:8080",     // an address with a port (the "denied" server, on 8080 only)
    "203.0.113.20:7",        // UDP echo on the same address
    "[2001:db8:1::20]:8080"  // an IPv6 address with a port
};

class FilteredEgressTest : public FakeInternetLaneTest {
 protected:
  std::map<std::string, std::string> Env(std::map<std::string, std::string> more = {}) {
    more["CODESPACE_DNS_UPSTREAM"] = kDnsServerV4;
    return more;
  }
  // `codespace run --egress allowlist ... -- CMD` as the worker in the worker host.
  CliResult Run(const std::vector<std::string>& cmd, std::map<std::string, std::string> env = {},
                const std::vector<std::string>& allow = kAllow) {
    std::vector<std::string> a = {"run", "--workspace", install_.workspace(), "--egress",
                                  "allowlist"};
    for (const auto& e : allow) {
      a.push_back("--allow");
      a.push_back(e);
    }
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return RunCodespace(install_, a, Env(env), net_->WorkerHostArgv({}, WorkerResolvConf::kHost));
  }
  CliResult Probe(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), install_.probe());
    return Run(args, env);
  }
  nlohmann::json Record() { return LatestRecord(install_); }
};

// --- reachable -------------------------------------------------------------------------------

TEST_F(FilteredEgressTest, AllowlistedNameIsReachableAndAdmittedByTheGate) {
  CliResult r = Probe({"connect-name", kAllowedName, "80"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  auto rec = Record();
  EXPECT_EQ(rec["plan"], "filtered") << rec.dump();
  EXPECT_EQ(rec["network"], "filtered");
  EXPECT_EQ(rec["state"], "exited");
  EXPECT_THAT(rec["network_report"]["dns_admitted"].dump(), HasSubstr("allowed.test 203.0.113.10"));
  EXPECT_GE(net_->ContactsAt(kAllowedV4, 80), 0);
}

TEST_F(FilteredEgressTest, AllowlistedAddressAndPortIsReachable) {
  CliResult r = Probe({"http-get", kDeniedV4, "8080"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("fake-internet 203.0.113.20:8080"));
}

TEST_F(FilteredEgressTest, UdpToAListedAddressIsReachable) {
  CliResult r = Probe({"udp-echo", kDeniedV4, "7"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
}

TEST_F(FilteredEgressTest, ListedIpv6AddressIsReachable) {
  CliResult r = Probe({"http-get", kDeniedV6, "8080"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
}

TEST_F(FilteredEgressTest, WildcardNameReachesOnlyItsPort) {
  CliResult r = Run({"/bin/sh", "-c",
                     fmt::format("\"$0\" connect-name {0} 80 && \"$0\" no-connect {1} 8080",
                                 kWildApiName, kWildV4),
                     install_.probe()});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(Record()["network_report"]["dns_admitted"].dump(),
              HasSubstr("api.wild.test 203.0.113.30:80"));
}

// --- not reachable ---------------------------------------------------------------------------

TEST_F(FilteredEgressTest, NonListedAddressIsUnreachableAndCounted) {
  CliResult r = Probe({"no-connect", kWildV4, "80"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_EQ(net_->ContactsAt(kWildV4, 80), 0);
  EXPECT_GT(Record()["network_report"]["dropped_packets"].get<uint64_t>(), 0u);
}

TEST_F(FilteredEgressTest, ListedAddressOnAnotherPortIsUnreachable) {
  CliResult r = Probe({"no-connect", kDeniedV4, "80"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_EQ(net_->ContactsAt(kDeniedV4, 80), 0);
}

TEST_F(FilteredEgressTest, NonListedIpv6AddressIsUnreachable) {
  CliResult r = Probe({"no-connect", kAllowedV6, "80"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_EQ(net_->ContactsAt(kAllowedV6, 80), 0);
}

TEST_F(FilteredEgressTest, IcmpEchoToANonListedAddressGetsNoReply) {
  CliResult r = Probe({"ping", kWildV4});
  EXPECT_EQ(r.code(), 0) << Describe(r);
}

TEST_F(FilteredEgressTest, MetadataAddressIsUnreachable) {
  CliResult r = Probe({"no-connect", kMetadataV4, "80"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  CliResult v6 = Probe({"no-connect", kMetadataV6, "80"});
  EXPECT_EQ(v6.code(), 0) << Describe(v6);
  EXPECT_EQ(net_->ContactsAt(kMetadataV4, 80), 0);
}

TEST_F(FilteredEgressTest, WorkerHostAddressesAndServicesAreUnreachable) {
  // The worker's uplink address, its side of the run's own veth, and its loopback service.
  CliResult r =
      Run({"/bin/sh", "-c",
           fmt::format("\"$0\" no-connect {0} {1} && \"$0\" no-connect \"$(\"$0\" gateway)\" "
                       "{1} && \"$0\" no-connect 127.0.0.1 {2}",
                       kWorkerUplinkV4, kWorkerServicePort, kWorkerLoopbackServicePort),
           install_.probe()});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("connect 10.201."));  // the gateway was really tried
}

TEST_F(FilteredEgressTest, TheOtherResolverAddressedDirectlyIsUnreachable) {
  CliResult r = Probe({"dns-direct", kOtherResolverV4, kDeniedName});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(net_->NamesQueriedAt(kOtherResolverV4), ::testing::IsEmpty());
}

TEST_F(FilteredEgressTest, NameNotOnTheListIsRefusedByTheGate) {
  CliResult r = Probe({"no-resolve", kDeniedName});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  auto rec = Record();
  EXPECT_THAT(rec["network_report"]["dns_refused"].dump(), HasSubstr("denied.test"));
  // Logged with the run id, in the run's own supervisor log.
  auto log = ReadFileToString(install_.state_dir() + "/runs/" + rec["id"].get<std::string>() +
                              "/supervisor.log");
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, HasSubstr("run " + rec["id"].get<std::string>() +
                              ": DNS gate refused \"denied.test\""));
  // The upstream never saw it.
  EXPECT_THAT(net_->NamesQueriedAt(kDnsServerV4), ::testing::Not(Contains(kDeniedName)));
}

TEST_F(FilteredEgressTest, RawAndPacketSocketsAreRefused) {
  CliResult r = Probe({"raw-socket"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
}

TEST_F(FilteredEgressTest, RoutesAddressesAndRulesCannotBeChangedFromInside) {
  CliResult r = Probe({"netadmin"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  CliResult caps = Probe({"caps"});
  EXPECT_EQ(caps.code(), 0) << Describe(caps);
}

// --- unconfined, as root: filtered by namespace without bubblewrap -----------------------------

TEST_F(FilteredEgressTest, UnconfinedRootIsFilteredByNamespace) {
  std::map<std::string, std::string> unconfined = {{"CODESPACE_BWRAP_PATH", "/nonexistent/bwrap"}};
  CliResult ok = Probe({"connect-name", kAllowedName, "80"}, unconfined);
  EXPECT_EQ(ok.code(), 0) << Describe(ok);
  EXPECT_THAT(ok.output, HasSubstr("confines=no"));
  EXPECT_EQ(Record()["network"], "filtered");
  CliResult blocked = Probe({"no-connect", kWildV4, "80"}, unconfined);
  EXPECT_EQ(blocked.code(), 0) << Describe(blocked);
  CliResult admin = Probe({"netadmin"}, unconfined);
  EXPECT_EQ(admin.code(), 0) << Describe(admin);
}

// --- teardown by name at start --------------------------------------------------------------

TEST_F(FilteredEgressTest, StartupSweepRemovesWhatAFinishedRunLeftAndNothingElse) {
  CliResult first = Probe({"links"});
  ASSERT_EQ(first.code(), 0) << Describe(first);
  ASSERT_TRUE(install_.WaitForSupervisors());  // its own teardown, after the record
  auto rec = Record();
  const std::string ns = rec["namespace"];
  const std::string id12 = ns.substr(3);
  const std::string stranger = "cs-ffffffffffff";  // no run of this store
  // Leave behind what a worker killed mid-teardown would: the namespace, its veth, its table.
  auto made = net_->RunInWorkerHost(
      {"/bin/sh", "-c",
       fmt::format("ip netns add {0} && ip netns add {3} && ip link add cs{1}h type veth peer "
                   "name cs{1}p && nft add table inet codespace_{1} && echo made",
                   ns, id12, "", stranger)},
      std::nullopt, WorkerResolvConf::kHost);
  ASSERT_TRUE(made.ok());
  ASSERT_THAT(made->output, HasSubstr("made"));

  CliResult next = Run({"/bin/true"});
  EXPECT_EQ(next.code(), 0) << Describe(next);
  EXPECT_THAT(next.output, HasSubstr("removed 1 leftover namespace(s) of finished runs"));
  auto left = net_->RunInWorkerHost({"/bin/sh", "-c", "ip netns list; ip -o link; nft list tables"},
                                    std::nullopt, WorkerResolvConf::kHost);
  ASSERT_TRUE(left.ok());
  EXPECT_THAT(left->output, ::testing::Not(HasSubstr(ns)));
  EXPECT_THAT(left->output, ::testing::Not(HasSubstr("cs" + id12 + "h")));
  EXPECT_THAT(left->output, ::testing::Not(HasSubstr("codespace_" + id12)));
  // Not ours to remove: still there (and removed by the test itself).
  EXPECT_THAT(left->output, HasSubstr(stranger));
  EXPECT_TRUE(RunCommand({"ip", "netns", "del", stranger}).ok());
}

// A supervisor records its run first and tears the network down after: in between, the run is
// finished but its namespace is its supervisor's to remove, and the sweep must leave it alone.
TEST_F(FilteredEgressTest, SweepLeavesAFinishedRunsNamespaceToItsLiveSupervisor) {
  CliResult first = Probe({"links"});
  ASSERT_EQ(first.code(), 0) << Describe(first);
  ASSERT_TRUE(install_.WaitForSupervisors());
  auto rec = Record();
  const std::string id = rec["id"];
  const std::string ns = rec["namespace"];
  auto made =
      net_->RunInWorkerHost({"/bin/sh", "-c", fmt::format("ip netns add {} && echo made", ns)},
                            std::nullopt, WorkerResolvConf::kHost);
  ASSERT_TRUE(made.ok());
  ASSERT_THAT(made->output, HasSubstr("made"));
  NetnsCleanup cleanup(ns);
  {
    // Its supervisor, still tearing down: the run directory's lock is held.
    auto lock = TakeSupervisorLock(RunDirFor(install_.state_dir(), id));
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    CliResult next = Run({"/bin/true"});
    EXPECT_EQ(next.code(), 0) << Describe(next);
    EXPECT_THAT(next.output, ::testing::Not(HasSubstr("leftover")));
    EXPECT_EQ(::access(("/run/netns/" + ns).c_str(), F_OK), 0) << "swept under its supervisor";
  }
  // Its supervisor gone (lock released) without removing it: now the sweep does.
  CliResult after = Run({"/bin/true"});
  EXPECT_EQ(after.code(), 0) << Describe(after);
  EXPECT_THAT(after.output, HasSubstr("removed 1 leftover namespace(s) of finished runs"));
  EXPECT_NE(::access(("/run/netns/" + ns).c_str(), F_OK), 0);
}

// --- many at once ------------------------------------------------------------------------------

TEST_F(FilteredEgressTest, FiftyConcurrentRunsGetDistinctNetworksAndLeaveNothing) {
  constexpr int kRuns = 50;
  std::vector<CliResult> results(kRuns);
  std::vector<std::thread> threads;
  // Every run holds its network until all fifty hold theirs (a file each in the workspace, then
  // one "go"): distinct addresses are owed to runs alive at once; a run already torn down may
  // hand its address on.
  const std::string go = install_.workspace() + "/go";
  auto held = [&](int i) { return fmt::format("{}/held-{}", install_.workspace(), i); };
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      results[i] = Run({"/bin/sh", "-c",
                        "ip -o -4 addr show dev eth0 | awk '{print \"addr=\" $4}'; "
                        "\"$0\" connect-name allowed.test 80; touch \"$1\"; n=0; "
                        "while [ ! -e \"$2\" ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done",
                        install_.probe(), held(i), go});
    });
  }
  for (int waited = 0; waited < 1200; ++waited) {
    int n = 0;
    for (int i = 0; i < kRuns; ++i) n += ::access(held(i).c_str(), F_OK) == 0;
    if (n == kRuns) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(WriteFileAtomically(go, "").ok());  // joined below either way
  for (auto& t : threads) t.join();
  std::map<std::string, int> addrs;  // address -> run
  std::vector<std::string> namespaces;
  for (int i = 0; i < kRuns; ++i) {
    const std::string& out = results[i].output;
    EXPECT_EQ(results[i].code(), 0) << "run " << i << ": " << Describe(results[i]);
    size_t at = out.find("addr=");
    ASSERT_NE(at, std::string::npos) << "run " << i << " printed no address: " << out;
    std::string addr = out.substr(at, out.find('\n', at) - at);
    EXPECT_TRUE(addrs.emplace(addr, i).second)
        << addr << " given to runs " << addrs[addr] << " and " << i << ":\n"
        << out << "\n---\n"
        << results[addrs[addr]].output;
    size_t ns = out.find("namespace=");
    ASSERT_NE(ns, std::string::npos) << out;
    namespaces.push_back(out.substr(ns + 10, 15));
  }
  EXPECT_EQ(std::set<std::string>(namespaces.begin(), namespaces.end()).size(),
            static_cast<size_t>(kRuns));
  // Nothing of any run is left in the worker host, /run/netns or /run/codespace, once the
  // supervisors (which record first, then tear down) are gone.
  ASSERT_TRUE(install_.WaitForSupervisors());
  auto links = net_->RunInWorkerHost({"ip", "-o", "link"}, std::nullopt, WorkerResolvConf::kHost);
  ASSERT_TRUE(links.ok());
  EXPECT_THAT(links->output, ::testing::Not(::testing::ContainsRegex("cs[0-9a-f]{12}h")));
  auto tables =
      net_->RunInWorkerHost({"nft", "list", "tables"}, std::nullopt, WorkerResolvConf::kHost);
  ASSERT_TRUE(tables.ok());
  EXPECT_THAT(tables->output, ::testing::Not(HasSubstr("codespace_")));
  auto netns = RunCommand({"ip", "netns", "list"});
  ASSERT_TRUE(netns.ok());
  for (const auto& ns : namespaces) EXPECT_THAT(netns->output, ::testing::Not(HasSubstr(ns)));
}

}  // namespace
}  // namespace codespace::lanes
