// The fake internet's self-test: what the filtered-egress lanes rely on holds — its servers answer
// from inside the worker host by address (IPv4 and IPv6) and by name, the worker host has no way
// to the machine's real uplink, and nothing of it outlives the object. No packet leaves the
// namespaces the test makes: routes are only looked up, never used, for real addresses.
#include "harness/fake_internet.h"

#include <dirent.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <sstream>

#include "base/file_util.h"
#include "base/testing/status_matchers.h"
#include "harness/netns_util.h"

namespace codespace::lanes {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

const std::string kProbe = std::string(CODESPACE_BUILD_DIR) + "/tests/escape_probe";

// Why this machine cannot run the fake internet, or "" when it can.
std::string MissingPrerequisite() {
  if (::geteuid() != 0) return "the fake internet builds network namespaces: needs root";
  std::string path = GetEnv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
  for (const char* tool : {"ip", "nsenter", "unshare", "mount"}) {
    if (!FindExecutable(tool, path).ok()) return fmt::format("needs `{}` on PATH", tool);
  }
  return "";
}

#define SKIP_UNLESS_FAKE_INTERNET_CAN_RUN()                      \
  do {                                                           \
    if (std::string why = MissingPrerequisite(); !why.empty()) { \
      GTEST_SKIP() << why;                                       \
    }                                                            \
  } while (0)

std::string Describe(const Result<CommandOutput>& r) {
  if (!r.ok()) return r.status().ToString();
  return fmt::format("{}, output:\n{}", r->status.ToString(), r->output);
}

int Code(const Result<CommandOutput>& r) { return r.ok() ? r->status.ShellCode() : -1; }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    while (!l.empty() && l.back() == ' ') l.pop_back();
    if (!l.empty()) lines.push_back(l);
  }
  return lines;
}

// Interface names from `ip -o link` output ("2: uplink0@if2: <...>" → "uplink0").
std::set<std::string> LinkNames(const std::string& ip_o_link) {
  std::set<std::string> names;
  for (const std::string& l : Lines(ip_o_link)) {
    size_t a = l.find(": ");
    size_t b = l.find_first_of(":@", a + 2);
    if (a != std::string::npos && b != std::string::npos) names.insert(l.substr(a + 2, b - a - 2));
  }
  return names;
}

std::string Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunCommand(argv);
  return r.ok() ? r->output : "";
}

int CountEntries(const char* dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir)) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

std::vector<std::string> OurNamespaces() {
  std::vector<std::string> ours;
  for (const std::string& n : ListNamedNetns()) {
    if (HarnessNamePid(n) == ::getpid()) ours.push_back(n);
  }
  return ours;
}

// Removes the named namespaces when the test ends, pass or fail.
struct NetnsGuard {
  std::vector<std::string> names;
  ~NetnsGuard() {
    for (const std::string& n : names) DeleteNamedNetns(n).IgnoreError();
  }
};

class FakeInternetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_UNLESS_FAKE_INTERNET_CAN_RUN();
    auto fi = FakeInternet::Create();
    ASSERT_OK(fi);
    fi_ = std::move(fi).value();
  }

  Result<CommandOutput> Probe(std::vector<std::string> args,
                              std::optional<std::vector<std::string>> env = std::nullopt) {
    args.insert(args.begin(), kProbe);
    return fi_->RunInWorkerHost(std::move(args), std::move(env));
  }

  std::unique_ptr<FakeInternet> fi_;
};

TEST_F(FakeInternetTest, HttpServersAnswerByAddressV4AndV6) {
  for (const char* addr : {kAllowedV4, kDeniedV4, kWildV4, kAllowedV6, kDeniedV6}) {
    for (int port : {kHttpPort, kHttpAltPort}) {
      auto r = Probe({"http-get", addr, std::to_string(port)});
      ASSERT_EQ(Code(r), 0) << addr << " " << port << ": " << Describe(r);
      std::string where = std::strchr(addr, ':') ? fmt::format("[{}]:{}", addr, port)
                                                 : fmt::format("{}:{}", addr, port);
      EXPECT_THAT(r->output, AllOf(HasSubstr("HTTP/1.0 200 OK"),
                                   HasSubstr("\nfake-internet " + where + "\n")));
    }
  }
  auto seen = fi_->HttpRequestsTo(kAllowedV6);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].port, kHttpPort);
  EXPECT_EQ(seen[0].peer, kWorkerUplinkV6);
  EXPECT_EQ(seen[0].request_line, "GET / HTTP/1.0");
  EXPECT_EQ(fi_->HttpRequestsTo(kAllowedV4).at(1).peer, kWorkerUplinkV4);
  EXPECT_EQ(fi_->ContactsAt(kDeniedV4, kHttpAltPort), 1);
}

TEST_F(FakeInternetTest, MetadataAnswersHttpOnPort80) {
  for (const char* addr : {kMetadataV4, kMetadataV6}) {
    auto r = Probe({"http-get", addr, "80"});
    EXPECT_EQ(Code(r), 0) << Describe(r);
    EXPECT_THAT(r->output, HasSubstr("fake-internet "));
    EXPECT_EQ(fi_->HttpRequestsTo(addr).size(), 1u);
  }
}

TEST_F(FakeInternetTest, EchoServersEchoTcpAndUdp) {
  for (const char* addr : {kAllowedV4, kDeniedV6, kDnsServerV4, kOtherResolverV4}) {
    auto r = Probe({"udp-echo", addr, "7"});
    EXPECT_EQ(Code(r), 0) << addr << ": " << Describe(r);
  }
  auto tcp = fi_->RunInWorkerHost(
      {"bash", "-c",
       fmt::format("exec 3<>/dev/tcp/{}/7 && echo hello-echo >&3 && head -n1 <&3", kAllowedV6)});
  EXPECT_EQ(Code(tcp), 0) << Describe(tcp);
  EXPECT_THAT(tcp->output, HasSubstr("hello-echo"));
  EXPECT_EQ(fi_->ContactsAt(kAllowedV6, kEchoPort), 1);
  // A port nobody serves is refused at once, and the probe says it failed.
  auto closed = Probe({"http-get", kAllowedV4, "9"});
  EXPECT_EQ(Code(closed), 1) << Describe(closed);
  EXPECT_THAT(closed->output, HasSubstr("Connection refused"));
}

TEST_F(FakeInternetTest, DnsServerAnswersTheZoneAndNothingElse) {
  struct Case {
    const char* name;
    const char* expect;
  };
  for (Case c : {Case{kAllowedName, "answer A 203.0.113.10 ttl 60"},
                 Case{kDeniedName, "answer A 203.0.113.20 ttl 60"},
                 Case{kWildApiName, "answer A 203.0.113.30 ttl 60"},
                 Case{kWildDeepName, "answer A 203.0.113.30 ttl 60"},
                 Case{"ALIAS.test", "answer type 5 ttl 60\nanswer A 203.0.113.10 ttl 60"},
                 Case{kShortTtlName, "answer A 203.0.113.10 ttl 2"}}) {
    auto r = Probe({"dns-direct", kDnsServerV4, c.name});
    EXPECT_EQ(Code(r), 19) << c.name << ": " << Describe(r);
    EXPECT_THAT(r->output, HasSubstr(c.expect)) << c.name;
  }
  for (const char* name : {"missing.test", "wild.test", "example.com"}) {
    auto r = Probe({"dns-direct", kDnsServerV4, name});
    EXPECT_EQ(Code(r), 0) << name << ": " << Describe(r);
    EXPECT_THAT(r->output, HasSubstr("rcode 3, 0 answer(s)")) << name;
  }
  EXPECT_THAT(fi_->NamesQueriedAt(kDnsServerV4), Contains("alias.test"));
  EXPECT_THAT(fi_->NamesQueriedAt(kOtherResolverV4), IsEmpty());
}

TEST_F(FakeInternetTest, OtherResolverAnswersEveryName) {
  auto known = Probe({"dns-direct", kOtherResolverV4, kAllowedName});
  EXPECT_EQ(Code(known), 19) << Describe(known);
  EXPECT_THAT(known->output, HasSubstr("answer A 203.0.113.10"));
  auto unknown = Probe({"dns-direct", kOtherResolverV4, "anything.example"});
  EXPECT_EQ(Code(unknown), 19) << Describe(unknown);
  EXPECT_THAT(unknown->output, HasSubstr("answer A 203.0.113.20"));
  EXPECT_THAT(fi_->NamesQueriedAt(kOtherResolverV4), ElementsAre(kAllowedName, "anything.example"));
  EXPECT_THAT(fi_->NamesQueriedAt(kDnsServerV4), IsEmpty());
}

TEST_F(FakeInternetTest, GetaddrinfoInTheWorkerHostUsesTheFakeDnsOverUdpAndTcp) {
  auto r = Probe({"resolve", kAllowedName});
  EXPECT_EQ(Code(r), 0) << Describe(r);
  EXPECT_THAT(r->output, AllOf(HasSubstr(kAllowedV4), HasSubstr(kAllowedV6)));
  r = Probe({"resolve", kAliasName});
  EXPECT_EQ(Code(r), 0) << Describe(r);
  EXPECT_THAT(r->output, HasSubstr(kAllowedV4));
  r = Probe({"no-resolve", "missing.test"});
  EXPECT_EQ(Code(r), 0) << Describe(r);
  r = Probe({"no-resolve", kDeniedName});
  EXPECT_EQ(Code(r), 20) << Describe(r);
  r = Probe({"connect-name", kAllowedName, "80"});
  EXPECT_EQ(Code(r), 0) << Describe(r);
  r = Probe({"connect-name", "missing.test", "80"});
  EXPECT_EQ(Code(r), 3) << Describe(r);

  std::vector<std::string> env = CurrentEnvironment();
  env.push_back("RES_OPTIONS=use-vc");  // glibc: ask over TCP
  r = Probe({"resolve", kWildApiName}, env);
  EXPECT_EQ(Code(r), 0) << Describe(r);
  EXPECT_THAT(r->output, HasSubstr(kWildV4));
  bool tcp_seen = false;
  for (const DnsQuerySeen& q : fi_->DnsQueries()) {
    EXPECT_EQ(q.server, kDnsServerV4);
    EXPECT_EQ(q.peer, kWorkerUplinkV4);
    tcp_seen |= q.tcp && q.name == kWildApiName;
  }
  EXPECT_TRUE(tcp_seen);
}

TEST_F(FakeInternetTest, WorkerServicesListenInTheWorkerHost) {
  auto r = Probe({"http-get", "127.0.0.1", std::to_string(kWorkerLoopbackServicePort)});
  EXPECT_EQ(Code(r), 0) << Describe(r);
  EXPECT_THAT(r->output, HasSubstr("worker-host 127.0.0.1:8801"));
  r = Probe({"http-get", kWorkerUplinkV4, std::to_string(kWorkerServicePort)});
  EXPECT_EQ(Code(r), 0) << Describe(r);
  EXPECT_THAT(r->output, HasSubstr("worker-host 198.51.100.2:8800"));
  r = Probe({"http-get", kWorkerUplinkV6, std::to_string(kWorkerServicePort)});
  EXPECT_EQ(Code(r), 0) << Describe(r);
  EXPECT_THAT(r->output, HasSubstr("worker-host [2001:db8:100::2]:8800"));
  EXPECT_EQ(fi_->ContactsAt("127.0.0.1", kWorkerLoopbackServicePort), 1);
  // A bare connect is a contact, not an HTTP request.
  r = Probe({"connect", kAllowedV4, "80"});
  EXPECT_EQ(Code(r), 0) << Describe(r);
  // The server thread sees the connection a moment after the client has it.
  for (int i = 0; i < 100 && fi_->ContactsAt(kAllowedV4, kHttpPort) == 0; ++i) ::usleep(10'000);
  EXPECT_EQ(fi_->ContactsAt(kAllowedV4, kHttpPort), 1);
  EXPECT_THAT(fi_->HttpRequestsTo(kAllowedV4), IsEmpty());
}

TEST_F(FakeInternetTest, WorkerHostHasOnlyTheRoutesItWasGiven) {
  const std::string w = fi_->worker_host_netns();
  const std::string i = fi_->internet_netns();
  EXPECT_THAT(LinkNames(Ip({"-n", w, "-o", "link"})), UnorderedElementsAre("lo", "uplink0"));
  EXPECT_THAT(LinkNames(Ip({"-n", i, "-o", "link"})), UnorderedElementsAre("lo", "fi0"));

  EXPECT_THAT(Lines(Ip({"-n", w, "-4", "route", "show"})),
              UnorderedElementsAre("default via 198.51.100.1 dev uplink0",
                                   "198.51.100.0/24 dev uplink0 proto kernel scope link src "
                                   "198.51.100.2"));
  EXPECT_THAT(
      Lines(Ip({"-n", w, "-6", "route", "show"})),
      UnorderedElementsAre("2001:db8:100::/64 dev uplink0 proto kernel metric 256 pref medium",
                           "fe80::/64 dev uplink0 proto kernel metric 256 pref medium",
                           "default via 2001:db8:100::1 dev uplink0 metric 1024 pref medium"));
  // Every route in every table leads to lo or the uplink, and only the default ones via a gateway.
  for (const char* family : {"-4", "-6"}) {
    for (const std::string& l : Lines(Ip({"-n", w, family, "route", "show", "table", "all"}))) {
      EXPECT_TRUE(l.find(" dev uplink0") != std::string::npos ||
                  l.find(" dev lo") != std::string::npos)
          << l;
      if (l.find(" via ") != std::string::npos) {
        EXPECT_EQ(l.rfind("default via ", 0), 0u) << l;
      }
    }
  }
  // The fake internet routes nowhere but back to the worker host, and does not forward.
  EXPECT_THAT(Lines(Ip({"-n", i, "-4", "route", "show"})),
              ElementsAre("198.51.100.0/24 dev fi0 proto kernel scope link src 198.51.100.1"));
  for (const std::string& l : Lines(Ip({"-n", i, "-6", "route", "show"}))) {
    EXPECT_THAT(l, Not(HasSubstr("default"))) << l;
  }
  auto fwd = RunCommand({"ip", "netns", "exec", i, "cat", "/proc/sys/net/ipv4/ip_forward"});
  EXPECT_EQ(fwd.ok() ? fwd->output : "", "0\n");

  // The machine's real gateway (read, never contacted) is unroutable past the fake internet: a
  // route lookup sends nothing.
  std::vector<std::string> real = {"192.0.2.1", "8.8.8.8"};
  for (const std::string& l : Lines(Ip({"-4", "route", "show", "default"}))) {
    std::istringstream in(l);
    for (std::string word; in >> word;) {
      if (word == "via" && in >> word) real.push_back(word);
    }
  }
  for (const std::string& addr : real) {
    auto r = RunCommand({"ip", "-n", i, "route", "get", addr});
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->status.success()) << addr << ": " << r->output;
    EXPECT_THAT(r->output, HasSubstr("unreachable")) << addr;
  }
  // Addresses were usable at once: nothing is still in duplicate address detection.
  EXPECT_THAT(Ip({"-n", w, "-6", "addr"}), Not(HasSubstr("tentative")));
}

TEST_F(FakeInternetTest, ProbeWallsFallInTheUnsandboxedWorkerHost) {
  // Run as root straight in the worker host (no sandbox), every wall falls: this checks that the
  // probe detects each forbidden action, which the escape lanes then expect to fail.
  auto r = Probe({"raw-socket"});
  EXPECT_EQ(Code(r), 17) << Describe(r);
  for (const char* addr : {kAllowedV4, kDeniedV6}) {
    r = Probe({"ping", addr});
    EXPECT_EQ(Code(r), 16) << Describe(r);
  }
  r = Probe({"dns-direct", kOtherResolverV4, "x.example"});
  EXPECT_EQ(Code(r), 19) << Describe(r);
  r = Probe({"netadmin"});
  EXPECT_EQ(Code(r), 18) << Describe(r);
  EXPECT_THAT(r->output, AllOf(HasSubstr("RTM_NEWADDR 10.99.99.1/32 dev lo: added"),
                               HasSubstr("blackhole 10.99.98.0/24: added"),
                               HasSubstr("add table inet escape_probe_test: added")));
  // ...and undoes what it did.
  const std::string w = fi_->worker_host_netns();
  EXPECT_THAT(Ip({"-n", w, "addr"}), Not(HasSubstr("10.99.99.1")));
  EXPECT_THAT(Ip({"-n", w, "route", "show", "table", "all"}), Not(HasSubstr("10.99.98.0")));
  auto tables = fi_->RunInWorkerHost({"nft", "list", "tables"});
  EXPECT_THAT(tables.ok() ? tables->output : "", Not(HasSubstr("escape_probe_test")));
  // An address nobody holds gives no echo reply: the wall-held path.
  r = Probe({"ping", "203.0.113.99"});
  EXPECT_EQ(Code(r), 0) << Describe(r);
}

TEST_F(FakeInternetTest, WorkerHostForwardingIsTheNamespacesOwn) {
  auto host_before = ReadFileToString("/proc/sys/net/ipv4/ip_forward");
  ASSERT_OK(host_before);
  for (bool on : {true, false}) {
    ASSERT_OK(fi_->SetWorkerHostForwarding(on));
    auto r = fi_->RunInWorkerHost(
        {"cat", "/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"});
    EXPECT_EQ(r.ok() ? r->output : "", on ? "1\n1\n" : "0\n0\n");
    EXPECT_EQ(ReadFileToString("/proc/sys/net/ipv4/ip_forward").value_or(""), *host_before);
  }
}

TEST_F(FakeInternetTest, HostResolvConfRunsInTheSameMountNamespace) {
  auto r = fi_->RunInWorkerHost({"readlink", "/proc/self/ns/mnt"}, std::nullopt,
                                WorkerResolvConf::kHost);
  ASSERT_EQ(Code(r), 0) << Describe(r);
  char self[128] = {0};
  ASSERT_GT(::readlink("/proc/self/ns/mnt", self, sizeof(self) - 1), 0);
  EXPECT_EQ(r->output, std::string(self) + "\n");
  // Also with an empty environment (no PATH): the wrapper names its tools by absolute path.
  auto fake = fi_->RunInWorkerHost({"/bin/cat", "/etc/resolv.conf"}, std::vector<std::string>{});
  EXPECT_EQ(Code(fake), 0) << Describe(fake);
  EXPECT_THAT(fake.ok() ? fake->output : "", HasSubstr("nameserver 203.0.113.53"));
}

// -- Lifetime ------------------------------------------------------------------------------------

int ThreadCount() { return CountEntries("/proc/self/task"); }
int FdCount() { return CountEntries("/proc/self/fd"); }

TEST(FakeInternetLifetimeTest, DestructionLeavesNothingBehind) {
  SKIP_UNLESS_FAKE_INTERNET_CAN_RUN();
  const std::set<std::string> root_links = LinkNames(Ip({"-o", "link"}));
  const int threads = ThreadCount();
  const int fds = FdCount();
  std::string w, i, resolv;
  const std::string sleeper = fmt::format("sleep 600.{}", ::getpid());  // a unique command line
  {
    auto fi = FakeInternet::Create();
    ASSERT_OK(fi);
    w = (*fi)->worker_host_netns();
    i = (*fi)->internet_netns();
    resolv = (*fi)->resolv_conf_path();
    EXPECT_TRUE(NamedNetnsExists(w));
    EXPECT_TRUE(NamedNetnsExists(i));
    EXPECT_EQ(LinkNames(Ip({"-o", "link"})), root_links) << "no veth ever shows in the root";
    // A process left running in the worker host is killed by the teardown.
    auto bg = (*fi)->RunInWorkerHost(
        {"sh", "-c", fmt::format("{} </dev/null >/dev/null 2>&1 &", sleeper)});
    EXPECT_EQ(Code(bg), 0) << Describe(bg);
    EXPECT_THAT(Ip({"netns", "pids", w}), Not(IsEmpty()));
    auto probe = (*fi)->RunInWorkerHost({kProbe, "http-get", kAllowedV4, "80"});
    EXPECT_EQ(Code(probe), 0) << Describe(probe);
    EXPECT_OK((*fi)->TearDown());
    EXPECT_OK((*fi)->TearDown());  // idempotent; the destructor runs it a third time
    EXPECT_FALSE((*fi)->RunInWorkerHost({"true"}).ok());
  }
  std::vector<std::string> left = ListNamedNetns();
  EXPECT_THAT(left, Not(Contains(w)));
  EXPECT_THAT(left, Not(Contains(i)));
  EXPECT_THAT(Ip({"netns", "list"}), AllOf(Not(HasSubstr(w)), Not(HasSubstr(i))));
  EXPECT_EQ(LinkNames(Ip({"-o", "link"})), root_links);
  EXPECT_EQ(ThreadCount(), threads);
  EXPECT_EQ(FdCount(), fds);
  EXPECT_FALSE(ReadFileToString(resolv).ok()) << resolv << " is still there";
  auto left_running = RunCommand({"pgrep", "-f", "^" + sleeper + "$"});
  EXPECT_TRUE(!left_running.ok() || left_running->output.empty()) << Describe(left_running);
}

TEST(FakeInternetLifetimeTest, FailedCreateLeavesNothingBehind) {
  SKIP_UNLESS_FAKE_INTERNET_CAN_RUN();
  const int threads = ThreadCount();
  const int fds = FdCount();
  for (const char* step :
       {"add internet netns", "add veth", "add server addresses", "start servers", "ready"}) {
    FakeInternetOptions o;
    o.fail_at_step = step;
    auto fi = FakeInternet::Create(o);
    EXPECT_THAT(fi, testing::StatusHasMessage(fmt::format("{}: injected failure", step)));
    EXPECT_THAT(OurNamespaces(), IsEmpty()) << "after a failure at " << step;
    EXPECT_EQ(ThreadCount(), threads) << step;
    EXPECT_EQ(FdCount(), fds) << step;
  }
}

TEST(FakeInternetLifetimeTest, StaleNamespacesOfDeadHarnessesAreRemoved) {
  SKIP_UNLESS_FAKE_INTERNET_CAN_RUN();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: its pid is dead now
  ASSERT_FALSE(PidAlive(child));
  const std::string stale = fmt::format("{}{}-0-w", kHarnessPrefix, child);
  const std::string live = fmt::format("{}{}-9999-w", kHarnessPrefix, ::getpid());
  NetnsGuard guard{{stale, live}};
  ASSERT_OK(AddNamedNetns(stale));
  // Another harness process running at the same time may sweep it from here on.
  RunIp({"-n", stale, "link", "add", "a0", "type", "veth", "peer", "name", "b0"}).IgnoreError();
  ASSERT_OK(AddNamedNetns(live));

  auto fi = FakeInternet::Create();
  ASSERT_OK(fi);
  EXPECT_FALSE(NamedNetnsExists(stale));
  EXPECT_TRUE(NamedNetnsExists(live)) << "a live harness's namespace must be left alone";
}

TEST(NetnsUtilTest, HarnessNamePid) {
  EXPECT_EQ(HarnessNamePid("cst-123-0-w"), 123);
  EXPECT_EQ(HarnessNamePid("cst-77-etc.AbC123"), 77);
  EXPECT_EQ(HarnessNamePid("cst-9"), 9);
  EXPECT_EQ(HarnessNamePid("cst-12x-0-w"), std::nullopt);
  EXPECT_EQ(HarnessNamePid("cst--1-w"), std::nullopt);
  EXPECT_EQ(HarnessNamePid("cs-123-w"), std::nullopt);
  EXPECT_EQ(HarnessNamePid("cst-0-w"), std::nullopt);
}

}  // namespace
}  // namespace codespace::lanes
