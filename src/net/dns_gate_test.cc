#include "net/dns_gate.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"
#include "base/unique_fd.h"
#include "net/dns_message.h"

// Everything here talks to 127.0.0.1 and ::1 only: the gate, its fake upstream and its clients.

namespace codespace {
namespace {

using ::codespace::testing::IsOk;
using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---- Sockets for the test's side ----

struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

Address ToAddress(const DnsEndpoint& endpoint) {
  Address out;
  if (endpoint.address.find(':') == std::string::npos) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(endpoint.port);
    EXPECT_EQ(::inet_pton(AF_INET, endpoint.address.c_str(), &sin.sin_addr), 1);
    std::memcpy(&out.storage, &sin, sizeof(sin));
    out.length = sizeof(sin);
  } else {
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(endpoint.port);
    EXPECT_EQ(::inet_pton(AF_INET6, endpoint.address.c_str(), &sin6.sin6_addr), 1);
    std::memcpy(&out.storage, &sin6, sizeof(sin6));
    out.length = sizeof(sin6);
  }
  return out;
}

int FamilyOf(const DnsEndpoint& endpoint) {
  return endpoint.address.find(':') == std::string::npos ? AF_INET : AF_INET6;
}

uint16_t LocalPort(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length), 0);
  if (storage.ss_family == AF_INET6) {
    sockaddr_in6 sin6{};
    std::memcpy(&sin6, &storage, sizeof(sin6));
    return ntohs(sin6.sin6_port);
  }
  sockaddr_in sin{};
  std::memcpy(&sin, &storage, sizeof(sin));
  return ntohs(sin.sin_port);
}

// Waits for `fd` to become readable; false on timeout.
bool WaitReadable(int fd, milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

// Sends one query over UDP and waits for the datagram that answers it.
Result<std::vector<uint8_t>> UdpExchange(const DnsEndpoint& server, std::span<const uint8_t> query,
                                         milliseconds timeout = milliseconds(5000)) {
  UniqueFd fd(::socket(FamilyOf(server), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError("socket", errno);
  const Address address = ToAddress(server);
  if (::connect(fd.get(), address.get(), address.length) != 0) return ErrnoError("connect", errno);
  if (::send(fd.get(), query.data(), query.size(), 0) < 0) return ErrnoError("send", errno);
  if (!WaitReadable(fd.get(), timeout)) return UnavailableError("no answer in time");
  std::vector<uint8_t> buffer(65536);
  const ssize_t n = ::recv(fd.get(), buffer.data(), buffer.size(), 0);
  if (n < 0) return ErrnoError("recv", errno);
  buffer.resize(static_cast<size_t>(n));
  return buffer;
}

// A client TCP connection speaking length-prefixed DNS.
class TcpClient {
 public:
  static Result<TcpClient> Connect(const DnsEndpoint& server) {
    UniqueFd fd(::socket(FamilyOf(server), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return ErrnoError("socket", errno);
    const Address address = ToAddress(server);
    if (::connect(fd.get(), address.get(), address.length) != 0) {
      return ErrnoError("connect", errno);
    }
    return TcpClient(std::move(fd));
  }

  Status Send(std::span<const uint8_t> message) {
    std::vector<uint8_t> framed = {static_cast<uint8_t>(message.size() >> 8),
                                   static_cast<uint8_t>(message.size() & 0xFF)};
    framed.insert(framed.end(), message.begin(), message.end());
    return WriteAll(fd_.get(), framed.data(), framed.size());
  }

  // The next message; kNotFound at EOF.
  Result<std::vector<uint8_t>> Receive(milliseconds timeout = milliseconds(5000)) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (in_.size() >= 2) {
        const size_t length = (static_cast<size_t>(in_[0]) << 8) | in_[1];
        if (in_.size() >= 2 + length) {
          std::vector<uint8_t> message(in_.begin() + 2,
                                       in_.begin() + 2 + static_cast<ptrdiff_t>(length));
          in_.erase(in_.begin(), in_.begin() + 2 + static_cast<ptrdiff_t>(length));
          return message;
        }
      }
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || !WaitReadable(fd_.get(), left)) {
        return UnavailableError("no answer in time");
      }
      uint8_t buffer[4096];
      const ssize_t n = ::recv(fd_.get(), buffer, sizeof(buffer), 0);
      if (n < 0) return ErrnoError("recv", errno);
      if (n == 0) return NotFoundError("connection closed");
      in_.insert(in_.end(), buffer, buffer + n);
    }
  }

  int fd() const { return fd_.get(); }

 private:
  explicit TcpClient(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
  std::vector<uint8_t> in_;
};

// ---- A fake upstream resolver: a thread answering from a tiny zone on 127.0.0.1 ----

class FakeUpstream {
 public:
  struct Answer {
    uint8_t rcode = kDnsRcodeNoError;
    std::vector<DnsRecord> records;
  };
  struct Options {
    bool truncate_udp = false;  // answer every UDP query with an empty TC answer
    bool silent = false;        // read UDP queries, never answer
    // Before the real answer, send one with a wrong id (and an evil address in it).
    bool spoof_first = false;
  };

  FakeUpstream() : FakeUpstream(Options{}) {}
  explicit FakeUpstream(Options options) : options_(options) {
    stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC));
    // UDP and TCP on one port: take a free UDP port, and try again if its TCP twin is in use.
    for (int attempt = 0; attempt < 16 && !tcp_.valid(); ++attempt) {
      udp_ = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      UniqueFd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_in sin{};
      sin.sin_family = AF_INET;
      sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      EXPECT_EQ(::bind(udp_.get(), reinterpret_cast<sockaddr*>(&sin), sizeof(sin)), 0);
      port_ = LocalPort(udp_.get());
      sin.sin_port = htons(port_);
      int one = 1;
      EXPECT_EQ(::setsockopt(tcp.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
      if (::bind(tcp.get(), reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) == 0) {
        tcp_ = std::move(tcp);
      }
    }
    EXPECT_TRUE(tcp_.valid()) << "no free UDP+TCP port pair on 127.0.0.1";
    EXPECT_EQ(::listen(tcp_.get(), 16), 0);
    thread_ = std::thread([this] { Serve(); });
  }

  ~FakeUpstream() {
    const uint64_t one = 1;
    EXPECT_EQ(::write(stop_.get(), &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
    thread_.join();
  }

  DnsEndpoint endpoint() const { return {"127.0.0.1", port_}; }

  void Set(std::string name, uint16_t qtype, Answer answer) {
    std::lock_guard lock(mu_);
    zone_[{std::move(name), qtype}] = std::move(answer);
  }
  void SetA(std::string name, const char* address, uint32_t ttl = 300) {
    auto record = MakeDnsAddressRecord(name, address, ttl);
    ASSERT_OK(record);
    Set(std::move(name), kDnsTypeA, {kDnsRcodeNoError, {*record}});
  }

  std::vector<std::string> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }
  int udp_queries() const { return udp_queries_.load(); }
  int tcp_queries() const { return tcp_queries_.load(); }

 private:
  std::vector<uint8_t> AnswerFor(std::span<const uint8_t> message, bool over_tcp) {
    auto query = ParseDnsQuery(message);
    if (!query.ok()) return BuildDnsError(message, kDnsRcodeFormErr);
    std::lock_guard lock(mu_);
    seen_.push_back(query->name);
    (over_tcp ? tcp_queries_ : udp_queries_)++;
    if (!over_tcp && options_.truncate_udp) {
      std::vector<uint8_t> response = BuildDnsResponse(message, kDnsRcodeNoError, {});
      response[2] |= static_cast<uint8_t>(kDnsFlagTc >> 8);
      return response;
    }
    auto it = zone_.find({query->name, query->qtype});
    if (it == zone_.end()) return BuildDnsResponse(message, kDnsRcodeNxDomain, {});
    return BuildDnsResponse(message, it->second.rcode, it->second.records);
  }

  void Serve() {
    for (;;) {
      pollfd fds[3] = {{stop_.get(), POLLIN, 0}, {udp_.get(), POLLIN, 0}, {tcp_.get(), POLLIN, 0}};
      if (::poll(fds, 3, -1) < 0) continue;
      if (fds[0].revents != 0) return;
      if (fds[1].revents != 0) ServeUdp();
      if (fds[2].revents != 0) ServeTcp();
    }
  }

  void ServeUdp() {
    std::vector<uint8_t> buffer(65536);
    sockaddr_storage from{};
    socklen_t length = sizeof(from);
    const ssize_t n = ::recvfrom(udp_.get(), buffer.data(), buffer.size(), 0,
                                 reinterpret_cast<sockaddr*>(&from), &length);
    if (n < 0) return;
    const std::span<const uint8_t> message(buffer.data(), static_cast<size_t>(n));
    std::vector<uint8_t> response = AnswerFor(message, /*over_tcp=*/false);
    if (options_.silent) return;
    if (options_.spoof_first) {
      auto evil = MakeDnsAddressRecord("", "198.51.100.66", 300);
      auto query = ParseDnsQuery(message);
      if (evil.ok() && query.ok()) {
        evil->name = query->name;
        std::vector<uint8_t> spoof =
            BuildDnsResponse(WithDnsId(message, static_cast<uint16_t>(query->id + 1)), 0,
                             std::vector<DnsRecord>{*evil});
        ::sendto(udp_.get(), spoof.data(), spoof.size(), 0, reinterpret_cast<sockaddr*>(&from),
                 length);
      }
    }
    ::sendto(udp_.get(), response.data(), response.size(), 0, reinterpret_cast<sockaddr*>(&from),
             length);
  }

  // One connection at a time, served to its end: enough for the gate's one query per connection.
  void ServeTcp() {
    UniqueFd fd(::accept4(tcp_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) return;
    std::vector<uint8_t> in;
    for (;;) {
      if (!WaitReadable(fd.get(), milliseconds(2000))) return;
      uint8_t buffer[4096];
      const ssize_t n = ::recv(fd.get(), buffer, sizeof(buffer), 0);
      if (n <= 0) return;
      in.insert(in.end(), buffer, buffer + n);
      while (in.size() >= 2) {
        const size_t length = (static_cast<size_t>(in[0]) << 8) | in[1];
        if (in.size() < 2 + length) break;
        std::vector<uint8_t> message(in.begin() + 2,
                                     in.begin() + 2 + static_cast<ptrdiff_t>(length));
        in.erase(in.begin(), in.begin() + 2 + static_cast<ptrdiff_t>(length));
        std::vector<uint8_t> response = AnswerFor(message, /*over_tcp=*/true);
        std::vector<uint8_t> framed = {static_cast<uint8_t>(response.size() >> 8),
                                       static_cast<uint8_t>(response.size() & 0xFF)};
        framed.insert(framed.end(), response.begin(), response.end());
        if (!WriteAll(fd.get(), framed.data(), framed.size()).ok()) return;
      }
    }
  }

  Options options_;
  UniqueFd udp_;
  UniqueFd tcp_;
  UniqueFd stop_;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, uint16_t>, Answer> zone_;
  std::vector<std::string> seen_;
  std::atomic<int> udp_queries_{0};
  std::atomic<int> tcp_queries_{0};
  std::thread thread_;
};

// ---- What the gate's callbacks saw ----

class Recorder {
 public:
  // A global sequence shared by the callbacks and the test's clients, to order events.
  int Tick() { return ++sequence_; }

  Status Admit(const std::vector<AdmittedAddress>& addresses) {
    std::lock_guard lock(mu_);
    last_admit_tick_ = Tick();
    if (!admit_status_.ok()) return admit_status_;
    admitted_.insert(admitted_.end(), addresses.begin(), addresses.end());
    return OkStatus();
  }
  void Refused(std::string_view name, uint16_t qtype) {
    std::lock_guard lock(mu_);
    refused_.emplace_back(name, qtype);
  }

  void FailAdmission(Status status) {
    std::lock_guard lock(mu_);
    admit_status_ = std::move(status);
  }
  std::vector<AdmittedAddress> admitted() const {
    std::lock_guard lock(mu_);
    return admitted_;
  }
  std::vector<std::pair<std::string, uint16_t>> refused() const {
    std::lock_guard lock(mu_);
    return refused_;
  }
  int last_admit_tick() const {
    std::lock_guard lock(mu_);
    return last_admit_tick_;
  }

 private:
  std::atomic<int> sequence_{0};
  mutable std::mutex mu_;
  Status admit_status_;
  std::vector<AdmittedAddress> admitted_;
  std::vector<std::pair<std::string, uint16_t>> refused_;
  int last_admit_tick_ = 0;
};

std::array<uint8_t, 16> Bytes(int family, const char* text) {
  std::array<uint8_t, 16> bytes{};
  EXPECT_EQ(::inet_pton(family, text, bytes.data()), 1) << text;
  return bytes;
}

AdmittedAddress Admitted(std::string name, const char* address, uint32_t ttl,
                         std::optional<uint16_t> port = std::nullopt) {
  const int family =
      std::string_view(address).find(':') == std::string_view::npos ? AF_INET : AF_INET6;
  return {std::move(name), family, Bytes(family, address), ttl, port};
}

std::vector<AllowlistEntry> Allowlist(std::initializer_list<const char*> entries) {
  std::vector<AllowlistEntry> out;
  for (const char* text : entries) {
    auto entry = ParseAllowlistEntry(text);
    EXPECT_OK(entry);
    if (entry.ok()) out.push_back(*entry);
  }
  return out;
}

uint8_t RcodeOf(std::span<const uint8_t> response) {
  return response.size() >= 4 ? static_cast<uint8_t>(response[3] & 0x0F) : 0xFF;
}
uint16_t IdOf(std::span<const uint8_t> response) {
  return response.size() >= 2 ? static_cast<uint16_t>((response[0] << 8) | response[1]) : 0;
}

class DnsGateTest : public ::testing::Test {
 protected:
  DnsGateConfig Config(std::initializer_list<const char*> allowlist, const DnsEndpoint& upstream) {
    DnsGateConfig config;
    config.run_id = "run-test";
    config.allowlist = Allowlist(allowlist);
    config.listen = {{"127.0.0.1", 0}};
    config.upstream = upstream;
    config.admit = [this](const std::vector<AdmittedAddress>& addresses) {
      return recorder_.Admit(addresses);
    };
    config.on_refused = [this](std::string_view name, uint16_t qtype) {
      recorder_.Refused(name, qtype);
    };
    return config;
  }

  std::unique_ptr<DnsGate> StartGate(DnsGateConfig config) {
    auto gate = DnsGate::Start(std::move(config));
    EXPECT_OK(gate);
    return gate.ok() ? std::move(gate).value() : nullptr;
  }

  Recorder recorder_;
};

TEST_F(DnsGateTest, AllowedNameIsAdmittedBeforeTheAnswerReachesTheClient) {
  FakeUpstream upstream;
  upstream.SetA("allowed.test", "203.0.113.7", 300);
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);

  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(0x1111, "Allowed.Test", kDnsTypeA));
  const int received_tick = recorder_.Tick();
  ASSERT_OK(response);
  // Admission happened, and happened before the client held the answer.
  ASSERT_GT(recorder_.last_admit_tick(), 0);
  EXPECT_LT(recorder_.last_admit_tick(), received_tick);
  EXPECT_THAT(recorder_.admitted(), ElementsAre(Admitted("allowed.test", "203.0.113.7", 300)));

  EXPECT_EQ(IdOf(*response), 0x1111);  // the client's id, not the upstream one
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeNoError);
  auto addresses = ExtractAnswerAddresses(*response, "allowed.test");
  ASSERT_OK(addresses);
  ASSERT_EQ(addresses->size(), 1u);
  EXPECT_EQ(addresses->front().bytes, Bytes(AF_INET, "203.0.113.7"));

  const DnsGate::Stats stats = gate->stats();
  EXPECT_EQ(stats.queries, 1u);
  EXPECT_EQ(stats.forwarded, 1u);
  EXPECT_EQ(stats.admitted_addresses, 1u);
  EXPECT_EQ(stats.refused, 0u);
  EXPECT_EQ(stats.upstream_failures, 0u);
}

TEST_F(DnsGateTest, AnswersOnIpv6ListenersToo) {
  FakeUpstream upstream;
  auto record = MakeDnsAddressRecord("allowed.test", "2001:db8::7", 60);
  ASSERT_OK(record);
  upstream.Set("allowed.test", kDnsTypeAaaa, {kDnsRcodeNoError, {*record}});
  DnsGateConfig config = Config({"allowed.test"}, upstream.endpoint());
  config.listen = {{"127.0.0.1", 0}, {"::1", 0}};
  auto gate = DnsGate::Start(std::move(config));
  if (!gate.ok() &&
      gate.status().message().find("Cannot assign requested address") != std::string::npos) {
    GTEST_SKIP() << "no ::1 on this machine: " << gate.status().ToString();
  }
  ASSERT_OK(gate);
  ASSERT_EQ((*gate)->listen_addresses().size(), 2u);
  const DnsEndpoint v6 = (*gate)->listen_addresses()[1];
  EXPECT_EQ(v6.address, "::1");
  EXPECT_NE(v6.port, 0);

  auto response = UdpExchange(v6, BuildDnsQuery(7, "allowed.test", kDnsTypeAaaa));
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeNoError);
  auto tcp = TcpClient::Connect(v6);
  ASSERT_OK(tcp);
  ASSERT_OK(tcp->Send(BuildDnsQuery(8, "allowed.test", kDnsTypeAaaa)));
  auto over_tcp = tcp->Receive();
  ASSERT_OK(over_tcp);
  EXPECT_EQ(IdOf(*over_tcp), 8);
  EXPECT_THAT(recorder_.admitted(), ElementsAre(Admitted("allowed.test", "2001:db8::7", 60),
                                                Admitted("allowed.test", "2001:db8::7", 60)));
}

TEST_F(DnsGateTest, WildcardCoversNamesStrictlyBelowItsSuffix) {
  FakeUpstream upstream;
  upstream.SetA("a.example.test", "203.0.113.1");
  upstream.SetA("a.b.example.test", "203.0.113.2");
  upstream.SetA("example.test", "203.0.113.3");
  auto gate = StartGate(Config({"*.example.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  const DnsEndpoint listen = gate->listen_addresses()[0];

  for (const char* name : {"a.example.test", "A.B.Example.Test"}) {
    auto response = UdpExchange(listen, BuildDnsQuery(1, name, kDnsTypeA));
    ASSERT_OK(response);
    EXPECT_EQ(RcodeOf(*response), kDnsRcodeNoError) << name;
  }
  for (const char* name : {"example.test", "notexample.test", "a.example.test.evil"}) {
    auto response = UdpExchange(listen, BuildDnsQuery(1, name, kDnsTypeA));
    ASSERT_OK(response);
    EXPECT_EQ(RcodeOf(*response), kDnsRcodeRefused) << name;
  }
  EXPECT_THAT(recorder_.admitted(), ElementsAre(Admitted("a.example.test", "203.0.113.1", 300),
                                                Admitted("a.b.example.test", "203.0.113.2", 300)));
  EXPECT_THAT(upstream.seen(), ElementsAre("a.example.test", "a.b.example.test"));
}

TEST_F(DnsGateTest, RefusedNameNeverReachesTheUpstream) {
  FakeUpstream upstream;
  upstream.SetA("denied.test", "203.0.113.66");
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);

  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(0x2222, "Denied.Test", kDnsTypeAaaa));
  ASSERT_OK(response);
  EXPECT_EQ(IdOf(*response), 0x2222);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeRefused);
  auto question = ParseDnsResponseQuestion(*response);
  ASSERT_OK(question);
  EXPECT_EQ(question->name, "denied.test");

  EXPECT_THAT(recorder_.refused(),
              ElementsAre(std::pair<std::string, uint16_t>("denied.test", kDnsTypeAaaa)));
  EXPECT_THAT(recorder_.admitted(), IsEmpty());
  EXPECT_THAT(upstream.seen(), IsEmpty());
  EXPECT_EQ(gate->stats().refused, 1u);
  EXPECT_EQ(gate->stats().forwarded, 0u);
}

TEST_F(DnsGateTest, OnlyClassInAndNoZoneTransfersAreForwarded) {
  FakeUpstream upstream;
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  const DnsEndpoint listen = gate->listen_addresses()[0];

  std::vector<uint8_t> chaos = BuildDnsQuery(3, "allowed.test", kDnsTypeA);
  chaos[chaos.size() - 1] = 3;  // QCLASS CH
  auto response = UdpExchange(listen, chaos);
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeRefused);

  auto tcp = TcpClient::Connect(listen);
  ASSERT_OK(tcp);
  ASSERT_OK(tcp->Send(BuildDnsQuery(4, "allowed.test", kDnsTypeAxfr)));
  auto axfr = tcp->Receive();
  ASSERT_OK(axfr);
  EXPECT_EQ(RcodeOf(*axfr), kDnsRcodeRefused);
  EXPECT_THAT(upstream.seen(), IsEmpty());
  EXPECT_EQ(recorder_.refused().size(), 2u);
}

TEST_F(DnsGateTest, CnameChainAdmitsOnlyTheChainsAddresses) {
  FakeUpstream upstream;
  auto target = MakeDnsAddressRecord("edge.cdn.test", "203.0.113.9", 300);
  auto unrelated = MakeDnsAddressRecord("evil.test", "198.51.100.66", 300);
  ASSERT_OK(target);
  ASSERT_OK(unrelated);
  upstream.Set(
      "www.allowed.test", kDnsTypeA,
      {kDnsRcodeNoError,
       {MakeDnsCnameRecord("www.allowed.test", "edge.cdn.test", 60), *target, *unrelated}});
  auto gate = StartGate(Config({"www.allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);

  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(5, "www.allowed.test", kDnsTypeA));
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeNoError);
  // The name is the one the allowlist matched; the TTL the chain's smallest.
  EXPECT_THAT(recorder_.admitted(), ElementsAre(Admitted("www.allowed.test", "203.0.113.9", 60)));
}

TEST_F(DnsGateTest, FailedAdmissionAnswersServfail) {
  FakeUpstream upstream;
  upstream.SetA("allowed.test", "203.0.113.7");
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  recorder_.FailAdmission(InternalError("nft: set cs-run-test/allowed4: No buffer space"));

  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(6, "allowed.test", kDnsTypeA));
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeServFail);
  auto addresses = ExtractAnswerAddresses(*response, "allowed.test");
  ASSERT_OK(addresses);
  EXPECT_THAT(*addresses, IsEmpty());  // the address never reaches the run
  EXPECT_EQ(gate->stats().admit_failures, 1u);
  EXPECT_EQ(gate->stats().admitted_addresses, 0u);
}

TEST_F(DnsGateTest, OtherQueryTypesAreForwardedWithNothingAdmitted) {
  FakeUpstream upstream;
  auto a = MakeDnsAddressRecord("allowed.test", "203.0.113.7", 300);
  ASSERT_OK(a);
  // A TXT answer carrying an address record: still nothing is admitted for a TXT query.
  upstream.Set("allowed.test", 16,
               {kDnsRcodeNoError, {DnsRecord{"allowed.test", 16, 300, {2, 'h', 'i'}}, *a}});
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);

  auto response = UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(7, "allowed.test", 16));
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeNoError);
  EXPECT_EQ(response->size(),
            BuildDnsResponse(BuildDnsQuery(7, "allowed.test", 16), 0,
                             std::vector<DnsRecord>{{"allowed.test", 16, 300, {2, 'h', 'i'}}, *a})
                .size());
  EXPECT_THAT(recorder_.admitted(), IsEmpty());
}

TEST_F(DnsGateTest, UpstreamRcodesArePassedOn) {
  FakeUpstream upstream;  // no record for the name: NXDOMAIN
  auto gate = StartGate(Config({"*.allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(8, "gone.allowed.test", kDnsTypeA));
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeNxDomain);
  EXPECT_THAT(recorder_.admitted(), IsEmpty());
}

TEST_F(DnsGateTest, UpstreamRefusingConnectionsAnswersServfailAtOnce) {
  // A port nobody listens on: ICMP port unreachable makes each attempt fail immediately.
  uint16_t closed_port = 0;
  {
    UniqueFd probe(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(probe.get(), reinterpret_cast<sockaddr*>(&sin), sizeof(sin)), 0);
    closed_port = LocalPort(probe.get());
  }
  auto gate = StartGate(Config({"allowed.test"}, {"127.0.0.1", closed_port}));
  ASSERT_NE(gate, nullptr);
  const auto start = Clock::now();
  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(9, "allowed.test", kDnsTypeA));
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeServFail);
  EXPECT_LT(Clock::now() - start, milliseconds(1500));
  EXPECT_EQ(gate->stats().upstream_failures, 1u);
  EXPECT_THAT(recorder_.admitted(), IsEmpty());
}

TEST_F(DnsGateTest, SilentUpstreamIsRetriedOnceThenAnswersServfail) {
  FakeUpstream upstream({.silent = true});
  DnsGateConfig config = Config({"allowed.test"}, upstream.endpoint());
  config.upstream_timeout = milliseconds(300);
  auto gate = StartGate(std::move(config));
  ASSERT_NE(gate, nullptr);
  const auto start = Clock::now();
  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(10, "allowed.test", kDnsTypeA));
  const auto elapsed = Clock::now() - start;
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeServFail);
  EXPECT_GE(elapsed, milliseconds(550));  // two attempts of 300 ms
  EXPECT_LT(elapsed, milliseconds(2000));
  EXPECT_EQ(upstream.udp_queries(), 2);
  EXPECT_EQ(gate->stats().upstream_failures, 1u);
}

TEST_F(DnsGateTest, DefaultTimeoutAnswersServfailWithinAboutFourSeconds) {
  FakeUpstream upstream({.silent = true});
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  const auto start = Clock::now();
  auto response = UdpExchange(gate->listen_addresses()[0],
                              BuildDnsQuery(11, "allowed.test", kDnsTypeA), milliseconds(6000));
  const auto elapsed = Clock::now() - start;
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeServFail);
  EXPECT_GE(elapsed, milliseconds(3900));
  EXPECT_LT(elapsed, milliseconds(5000));
}

TEST_F(DnsGateTest, SpoofedAnswerWithAnotherIdIsIgnored) {
  FakeUpstream upstream({.spoof_first = true});
  upstream.SetA("allowed.test", "203.0.113.7");
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(12, "allowed.test", kDnsTypeA));
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeNoError);
  EXPECT_THAT(recorder_.admitted(), ElementsAre(Admitted("allowed.test", "203.0.113.7", 300)));
}

TEST_F(DnsGateTest, TruncatedUpstreamAnswerIsAskedAgainOverTcp) {
  FakeUpstream upstream({.truncate_udp = true});
  upstream.SetA("allowed.test", "203.0.113.7");
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(13, "allowed.test", kDnsTypeA));
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeNoError);
  EXPECT_EQ(response->at(2) & (kDnsFlagTc >> 8), 0);
  EXPECT_EQ(upstream.udp_queries(), 1);
  EXPECT_EQ(upstream.tcp_queries(), 1);
  EXPECT_THAT(recorder_.admitted(), ElementsAre(Admitted("allowed.test", "203.0.113.7", 300)));
}

TEST_F(DnsGateTest, AnswerTooBigForAUdpClientArrivesTruncatedAndWholeOverTcp) {
  FakeUpstream upstream({.truncate_udp = true});
  std::vector<DnsRecord> records;
  for (int i = 1; i <= 60; ++i) {
    auto record = MakeDnsAddressRecord("big.test", fmt::format("203.0.113.{}", i), 300);
    ASSERT_OK(record);
    records.push_back(*record);
  }
  upstream.Set("big.test", kDnsTypeA, {kDnsRcodeNoError, records});
  auto gate = StartGate(Config({"big.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  const DnsEndpoint listen = gate->listen_addresses()[0];

  auto udp = UdpExchange(listen, BuildDnsQuery(14, "big.test", kDnsTypeA));
  ASSERT_OK(udp);
  EXPECT_LE(udp->size(), 512u);
  EXPECT_NE(udp->at(2) & (kDnsFlagTc >> 8), 0);
  EXPECT_EQ(IdOf(*udp), 14);

  auto tcp = TcpClient::Connect(listen);
  ASSERT_OK(tcp);
  ASSERT_OK(tcp->Send(BuildDnsQuery(15, "big.test", kDnsTypeA)));
  auto whole = tcp->Receive();
  ASSERT_OK(whole);
  auto addresses = ExtractAnswerAddresses(*whole, "big.test");
  ASSERT_OK(addresses);
  EXPECT_EQ(addresses->size(), 60u);
  EXPECT_EQ(recorder_.admitted().size(), 120u);  // admitted for both answers
}

TEST_F(DnsGateTest, TcpClientsSendSeveralQueriesOnOneConnection) {
  FakeUpstream upstream;
  upstream.SetA("allowed.test", "203.0.113.7");
  upstream.SetA("also.test", "203.0.113.8");
  auto gate = StartGate(Config({"allowed.test", "also.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  auto tcp = TcpClient::Connect(gate->listen_addresses()[0]);
  ASSERT_OK(tcp);
  // Three queries in one write, so the gate must split the stream itself.
  std::vector<uint8_t> stream;
  for (auto [id, name] : std::vector<std::pair<uint16_t, const char*>>{
           {21, "allowed.test"}, {22, "denied.test"}, {23, "also.test"}}) {
    std::vector<uint8_t> query = BuildDnsQuery(id, name, kDnsTypeA);
    stream.push_back(static_cast<uint8_t>(query.size() >> 8));
    stream.push_back(static_cast<uint8_t>(query.size()));
    stream.insert(stream.end(), query.begin(), query.end());
  }
  ASSERT_OK(WriteAll(tcp->fd(), stream.data(), stream.size()));
  std::map<uint16_t, uint8_t> rcodes;
  for (int i = 0; i < 3; ++i) {
    auto response = tcp->Receive();
    ASSERT_OK(response);
    rcodes[IdOf(*response)] = RcodeOf(*response);
  }
  EXPECT_THAT(rcodes, ElementsAre(std::pair<const uint16_t, uint8_t>(21, kDnsRcodeNoError),
                                  std::pair<const uint16_t, uint8_t>(22, kDnsRcodeRefused),
                                  std::pair<const uint16_t, uint8_t>(23, kDnsRcodeNoError)));
  // And the connection stays usable.
  ASSERT_OK(tcp->Send(BuildDnsQuery(24, "allowed.test", kDnsTypeA)));
  auto again = tcp->Receive();
  ASSERT_OK(again);
  EXPECT_EQ(IdOf(*again), 24);
}

TEST_F(DnsGateTest, TcpClientThatHalfClosesStillGetsItsAnswers) {
  FakeUpstream upstream;
  upstream.SetA("allowed.test", "203.0.113.7");
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  auto tcp = TcpClient::Connect(gate->listen_addresses()[0]);
  ASSERT_OK(tcp);
  ASSERT_OK(tcp->Send(BuildDnsQuery(25, "allowed.test", kDnsTypeA)));
  ASSERT_OK(tcp->Send(BuildDnsQuery(26, "denied.test", kDnsTypeA)));
  ASSERT_EQ(::shutdown(tcp->fd(), SHUT_WR), 0);
  std::set<uint16_t> ids;
  for (int i = 0; i < 2; ++i) {
    auto response = tcp->Receive();
    ASSERT_OK(response);
    ids.insert(IdOf(*response));
  }
  EXPECT_THAT(ids, ElementsAre(25, 26));
  // Then the gate closes the connection.
  EXPECT_THAT(tcp->Receive(milliseconds(2000)), StatusIs(StatusCode::kNotFound));
}

TEST_F(DnsGateTest, IdleTcpClientsAreClosed) {
  FakeUpstream upstream;
  DnsGateConfig config = Config({"allowed.test"}, upstream.endpoint());
  config.tcp_idle_timeout = milliseconds(200);
  auto gate = StartGate(std::move(config));
  ASSERT_NE(gate, nullptr);
  auto tcp = TcpClient::Connect(gate->listen_addresses()[0]);
  ASSERT_OK(tcp);
  const auto start = Clock::now();
  EXPECT_THAT(tcp->Receive(milliseconds(3000)), StatusIs(StatusCode::kNotFound));
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
}

TEST_F(DnsGateTest, TcpClientsBeyondTheLimitAreClosed) {
  FakeUpstream upstream;
  upstream.SetA("allowed.test", "203.0.113.7");
  DnsGateConfig config = Config({"allowed.test"}, upstream.endpoint());
  config.max_tcp_clients = 2;
  auto gate = StartGate(std::move(config));
  ASSERT_NE(gate, nullptr);
  const DnsEndpoint listen = gate->listen_addresses()[0];
  std::vector<TcpClient> clients;
  for (int i = 0; i < 2; ++i) {
    auto tcp = TcpClient::Connect(listen);
    ASSERT_OK(tcp);
    // A round trip, so the gate has accepted this one before the next connects.
    ASSERT_OK(tcp->Send(BuildDnsQuery(static_cast<uint16_t>(30 + i), "allowed.test", kDnsTypeA)));
    ASSERT_OK(tcp->Receive());
    clients.push_back(std::move(tcp).value());
  }
  auto third = TcpClient::Connect(listen);
  ASSERT_OK(third);
  // It may be closed before or after the query is written; either way no answer comes.
  (void)third->Send(BuildDnsQuery(32, "allowed.test", kDnsTypeA));
  auto refused = third->Receive();
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(refused.status().code() == StatusCode::kUnavailable) << refused.status().ToString();
  // The first two still work.
  ASSERT_OK(clients[0].Send(BuildDnsQuery(33, "allowed.test", kDnsTypeA)));
  EXPECT_OK(clients[0].Receive());
}

TEST_F(DnsGateTest, ManyConcurrentQueriesAreAllAnswered) {
  FakeUpstream upstream;
  for (int i = 0; i < 50; ++i) {
    upstream.SetA(fmt::format("h{}.allowed.test", i), fmt::format("203.0.113.{}", i + 1).c_str());
  }
  auto gate = StartGate(Config({"*.allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  const DnsEndpoint listen = gate->listen_addresses()[0];

  // 8 clients, each with 25 queries outstanding at once on one socket.
  constexpr int kClients = 8;
  constexpr int kPerClient = 25;
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      const Address address = ToAddress(listen);
      ASSERT_EQ(::connect(fd.get(), address.get(), address.length), 0);
      for (int q = 0; q < kPerClient; ++q) {
        const uint16_t id = static_cast<uint16_t>(c * 100 + q);
        std::vector<uint8_t> query = BuildDnsQuery(
            id, fmt::format("h{}.allowed.test", (c * kPerClient + q) % 50), kDnsTypeA);
        ASSERT_GT(::send(fd.get(), query.data(), query.size(), 0), 0);
      }
      std::set<uint16_t> ids;
      while (ids.size() < kPerClient && WaitReadable(fd.get(), milliseconds(5000))) {
        uint8_t buffer[1024];
        const ssize_t n = ::recv(fd.get(), buffer, sizeof(buffer), 0);
        ASSERT_GT(n, 0);
        const std::span<const uint8_t> response(buffer, static_cast<size_t>(n));
        EXPECT_EQ(RcodeOf(response), kDnsRcodeNoError);
        ids.insert(IdOf(response));
      }
      answered += static_cast<int>(ids.size());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(answered.load(), kClients * kPerClient);
  EXPECT_EQ(gate->stats().forwarded, static_cast<uint64_t>(kClients * kPerClient));
  EXPECT_EQ(recorder_.admitted().size(), static_cast<size_t>(kClients * kPerClient));
}

TEST_F(DnsGateTest, QueriesBeyondTheInFlightBoundGetServfail) {
  FakeUpstream upstream({.silent = true});
  DnsGateConfig config = Config({"allowed.test"}, upstream.endpoint());
  config.max_in_flight = 2;
  config.upstream_timeout = milliseconds(1000);
  auto gate = StartGate(std::move(config));
  ASSERT_NE(gate, nullptr);
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const Address address = ToAddress(gate->listen_addresses()[0]);
  ASSERT_EQ(::connect(fd.get(), address.get(), address.length), 0);
  const auto start = Clock::now();
  for (uint16_t id = 1; id <= 3; ++id) {
    std::vector<uint8_t> query = BuildDnsQuery(id, "allowed.test", kDnsTypeA);
    ASSERT_GT(::send(fd.get(), query.data(), query.size(), 0), 0);
  }
  ASSERT_TRUE(WaitReadable(fd.get(), milliseconds(900)));
  uint8_t buffer[512];
  const ssize_t n = ::recv(fd.get(), buffer, sizeof(buffer), 0);
  ASSERT_GT(n, 0);
  const std::span<const uint8_t> first(buffer, static_cast<size_t>(n));
  EXPECT_EQ(IdOf(first), 3);
  EXPECT_EQ(RcodeOf(first), kDnsRcodeServFail);
  EXPECT_LT(Clock::now() - start, milliseconds(900));
  EXPECT_EQ(gate->stats().dropped, 1u);
}

TEST_F(DnsGateTest, EachMatchingEntryAdmitsTheAddressWithItsPort) {
  FakeUpstream upstream;
  upstream.SetA("api.example.test", "203.0.113.7", 120);
  auto gate = StartGate(Config({"api.example.test:443", "*.example.test:8443", "other.test:22"},
                               upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(40, "api.example.test", kDnsTypeA));
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeNoError);
  EXPECT_THAT(recorder_.admitted(),
              UnorderedElementsAre(Admitted("api.example.test", "203.0.113.7", 120, 443),
                                   Admitted("api.example.test", "203.0.113.7", 120, 8443)));
  EXPECT_EQ(gate->stats().admitted_addresses, 2u);
}

TEST_F(DnsGateTest, AddressEntriesDoNotAllowNames) {
  FakeUpstream upstream;
  auto gate = StartGate(Config({"203.0.113.7", "10.0.0.0/8"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  auto response =
      UdpExchange(gate->listen_addresses()[0], BuildDnsQuery(41, "7.113.0.203.in-addr.arpa", 12));
  ASSERT_OK(response);
  EXPECT_EQ(RcodeOf(*response), kDnsRcodeRefused);
}

TEST_F(DnsGateTest, MalformedMessagesGetFormerrOrNothing) {
  FakeUpstream upstream;
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  const DnsEndpoint listen = gate->listen_addresses()[0];

  // Two questions: FORMERR with the id echoed.
  std::vector<uint8_t> two = BuildDnsQuery(50, "allowed.test", kDnsTypeA);
  two[5] = 2;
  auto formerr = UdpExchange(listen, two);
  ASSERT_OK(formerr);
  EXPECT_EQ(IdOf(*formerr), 50);
  EXPECT_EQ(RcodeOf(*formerr), kDnsRcodeFormErr);

  // NOTIFY: NOTIMP.
  std::vector<uint8_t> notify = BuildDnsQuery(51, "allowed.test", kDnsTypeA);
  notify[2] = static_cast<uint8_t>(4 << 3);
  auto notimp = UdpExchange(listen, notify);
  ASSERT_OK(notimp);
  EXPECT_EQ(RcodeOf(*notimp), kDnsRcodeNotImp);

  // A response, and a runt: no answer at all.
  std::vector<uint8_t> response = BuildDnsError(BuildDnsQuery(52, "allowed.test", kDnsTypeA), 0);
  EXPECT_THAT(UdpExchange(listen, response, milliseconds(300)), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(UdpExchange(listen, std::vector<uint8_t>{1, 2, 3}, milliseconds(300)),
              StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(upstream.seen(), IsEmpty());

  // The gate still answers afterwards.
  upstream.SetA("allowed.test", "203.0.113.7");
  auto ok = UdpExchange(listen, BuildDnsQuery(53, "allowed.test", kDnsTypeA));
  ASSERT_OK(ok);
  EXPECT_EQ(RcodeOf(*ok), kDnsRcodeNoError);
}

TEST_F(DnsGateTest, StartNamesTheCallThatFailed) {
  // The UDP port is taken by another socket.
  UniqueFd taken(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(taken.get(), reinterpret_cast<sockaddr*>(&sin), sizeof(sin)), 0);
  const uint16_t port = LocalPort(taken.get());

  DnsGateConfig config = Config({"allowed.test"}, {"127.0.0.1", 53});
  config.listen = {{"127.0.0.1", port}};
  auto gate = DnsGate::Start(config);
  EXPECT_THAT(
      gate, StatusHasMessage(fmt::format("bind(127.0.0.1:{}/udp): Address already in use", port)));

  config.listen = {{"not-an-address", 53}};
  EXPECT_THAT(DnsGate::Start(config),
              StatusHasMessage("listen address \"not-an-address\": not an IPv4 or IPv6 address"));

  config.listen = {{"127.0.0.1", 0}};
  config.upstream = {"resolver.test", 53};
  EXPECT_THAT(DnsGate::Start(config), StatusHasMessage("upstream address \"resolver.test\""));

  config.upstream = {"127.0.0.1", 53};
  config.admit = nullptr;
  EXPECT_THAT(DnsGate::Start(config), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(DnsGate::Start(config), StatusHasMessage("DNS gate for run run-test: no admit"));

  config = Config({"allowed.test"}, {"127.0.0.1", 53});
  config.listen.clear();
  EXPECT_THAT(DnsGate::Start(config), StatusHasMessage("no listen address"));
}

TEST_F(DnsGateTest, StopIsIdempotentAndClosesTheSockets) {
  FakeUpstream upstream({.silent = true});
  auto gate = StartGate(Config({"allowed.test"}, upstream.endpoint()));
  ASSERT_NE(gate, nullptr);
  const DnsEndpoint listen = gate->listen_addresses()[0];
  // A query left in flight does not hold Stop up.
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const Address address = ToAddress(listen);
  ASSERT_EQ(::connect(fd.get(), address.get(), address.length), 0);
  std::vector<uint8_t> query = BuildDnsQuery(60, "allowed.test", kDnsTypeA);
  ASSERT_GT(::send(fd.get(), query.data(), query.size(), 0), 0);
  while (upstream.udp_queries() == 0) std::this_thread::sleep_for(milliseconds(5));

  const auto start = Clock::now();
  gate->Stop();
  gate->Stop();
  EXPECT_LT(Clock::now() - start, milliseconds(500));
  // The port is free again: a second gate can take it.
  DnsGateConfig config = Config({"allowed.test"}, upstream.endpoint());
  config.listen = {listen};
  auto again = DnsGate::Start(config);
  EXPECT_OK(again);
  gate.reset();
}

}  // namespace
}  // namespace codespace
