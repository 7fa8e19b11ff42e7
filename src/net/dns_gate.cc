#include "net/dns_gate.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <unordered_map>
#include <utility>

#include "base/unique_fd.h"
#include "net/dns_message.h"

namespace codespace {

namespace {

using Clock = std::chrono::steady_clock;

// An upstream query is tried this many times over UDP before the client gets SERVFAIL.
constexpr int kUdpAttempts = 2;
// Datagrams read from one listener per wake-up, so that one busy socket cannot starve the others.
constexpr int kUdpBatch = 64;
// A TCP client whose unsent replies pile up beyond this is not reading them: it is dropped.
constexpr size_t kMaxTcpOutput = 1 << 20;
// After accept() fails for want of descriptors, the listener rests this long. Level-triggered
// epoll would otherwise report the pending connection again at once, spinning the loop.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr size_t kMaxMessage = 65535;

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family = 0;

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

Result<SocketAddress> ToSocketAddress(const DnsEndpoint& endpoint, std::string_view role) {
  SocketAddress out;
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, endpoint.address.c_str(), &v4) == 1) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(endpoint.port);
    sin.sin_addr = v4;
    std::memcpy(&out.storage, &sin, sizeof(sin));
    out.length = sizeof(sin);
    out.family = AF_INET;
    return out;
  }
  if (::inet_pton(AF_INET6, endpoint.address.c_str(), &v6) == 1) {
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(endpoint.port);
    sin6.sin6_addr = v6;
    std::memcpy(&out.storage, &sin6, sizeof(sin6));
    out.length = sizeof(sin6);
    out.family = AF_INET6;
    return out;
  }
  return InvalidArgumentError(
      fmt::format("{} address {:?}: not an IPv4 or IPv6 address", role, endpoint.address));
}

uint16_t PortOf(const SocketAddress& address) {
  if (address.family == AF_INET) {
    sockaddr_in sin{};
    std::memcpy(&sin, &address.storage, sizeof(sin));
    return ntohs(sin.sin_port);
  }
  sockaddr_in6 sin6{};
  std::memcpy(&sin6, &address.storage, sizeof(sin6));
  return ntohs(sin6.sin6_port);
}

void SetPort(SocketAddress& address, uint16_t port) {
  if (address.family == AF_INET) {
    sockaddr_in sin{};
    std::memcpy(&sin, &address.storage, sizeof(sin));
    sin.sin_port = htons(port);
    std::memcpy(&address.storage, &sin, sizeof(sin));
  } else {
    sockaddr_in6 sin6{};
    std::memcpy(&sin6, &address.storage, sizeof(sin6));
    sin6.sin6_port = htons(port);
    std::memcpy(&address.storage, &sin6, sizeof(sin6));
  }
}

Result<UniqueFd> MakeSocket(int family, int type, std::string_view what) {
  UniqueFd fd(::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return ErrnoError(
        fmt::format("socket({}, {})", family == AF_INET ? "AF_INET" : "AF_INET6", what), errno);
  }
  if (family == AF_INET6) {
    // A listener on "::" must not take IPv4 as well: the IPv4 address is configured on its own.
    int one = 1;
    if (::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) {
      return ErrnoError("setsockopt(IPV6_V6ONLY)", errno);
    }
  }
  return fd;
}

// A fresh, unpredictable query id for each upstream attempt: together with the random source
// port of a new socket, it is what keeps an off-path spoofer from answering for the upstream.
uint16_t RandomId() {
  uint16_t id = 0;
  if (::getrandom(&id, sizeof(id), GRND_NONBLOCK) == static_cast<ssize_t>(sizeof(id))) return id;
  thread_local std::mt19937 fallback{std::random_device{}()};
  return static_cast<uint16_t>(fallback());
}

enum class Kind : uint64_t { kStop = 1, kUdpListener, kTcpListener, kTcpClient, kUpstream };

uint64_t Token(Kind kind, uint64_t id) { return (static_cast<uint64_t>(kind) << 56) | id; }
Kind TokenKind(uint64_t token) { return static_cast<Kind>(token >> 56); }
uint64_t TokenId(uint64_t token) { return token & ((uint64_t{1} << 56) - 1); }

}  // namespace

std::string DnsEndpoint::ToString() const {
  if (address.find(':') != std::string::npos) return fmt::format("[{}]:{}", address, port);
  return fmt::format("{}:{}", address, port);
}

class DnsGate::Loop {
 public:
  explicit Loop(DnsGateConfig config) : config_(std::move(config)) {}

  Status Open();
  void Run();
  void RequestStop();
  // Closes every socket; only once Run has returned.
  void Close();
  Stats stats() const;

  const std::vector<DnsEndpoint>& bound() const { return bound_; }

 private:
  struct Listener {
    UniqueFd udp;
    UniqueFd tcp;
    std::optional<Clock::time_point> accept_resume;  // set while accepting is paused
  };

  // Where a reply goes: a UDP client of a listener, or a TCP connection (by id).
  struct Client {
    bool tcp = false;
    size_t listener = 0;
    SocketAddress address;    // UDP only
    uint64_t connection = 0;  // TCP only
    uint16_t max_udp_response = kDnsClassicUdpSize;
  };

  struct TcpClient {
    UniqueFd fd;
    std::vector<uint8_t> in;
    std::vector<uint8_t> out;
    size_t out_sent = 0;
    uint32_t watched = EPOLLIN;  // the events epoll reports for it now
    bool read_closed = false;    // the client half-closed; answer what it asked, then close
    size_t pending = 0;          // queries waiting for the upstream
    Clock::time_point last_active;
  };

  // One allowed query waiting for the upstream.
  struct Pending {
    Client client;
    std::vector<uint8_t> query;  // as the client sent it
    DnsQuery question;
    std::vector<std::optional<uint16_t>> ports;  // of the matching allowlist entries
    UniqueFd upstream;
    uint16_t upstream_id = 0;
    int udp_attempts = 0;
    bool over_tcp = false;
    Clock::time_point deadline;
    std::vector<uint8_t> tcp_out;  // length-prefixed query, while over TCP
    size_t tcp_out_sent = 0;
    std::vector<uint8_t> tcp_in;
  };

  struct Counters {
    std::atomic<uint64_t> queries{0};
    std::atomic<uint64_t> refused{0};
    std::atomic<uint64_t> forwarded{0};
    std::atomic<uint64_t> admitted_addresses{0};
    std::atomic<uint64_t> admit_failures{0};
    std::atomic<uint64_t> upstream_failures{0};
    std::atomic<uint64_t> dropped{0};
  };

  Status Watch(int fd, uint32_t events, uint64_t token);
  void Rewatch(int fd, uint32_t events, uint64_t token);

  void OnUdpReadable(size_t listener);
  void OnTcpAcceptable(size_t listener);
  void OnTcpClientEvent(uint64_t id, uint32_t events);
  void OnUpstreamEvent(uint64_t id, uint32_t events);
  void OnTimers(Clock::time_point now);
  int NextTimeoutMs(Clock::time_point now) const;

  void HandleMessage(std::span<const uint8_t> message, const Client& client);
  void Refuse(std::span<const uint8_t> message, const DnsQuery& query, const Client& client);
  void Reply(const Client& client, std::vector<uint8_t> response);
  void FlushTcpClient(uint64_t id);
  void CloseTcpClient(uint64_t id);

  void SendUdpAttempt(uint64_t id);
  Status TryUdpAttempt(Pending& pending, uint64_t id);
  void StartTcpAttempt(uint64_t id);
  Status TryTcpAttempt(Pending& pending, uint64_t id);
  void ReadUpstreamUdp(uint64_t id);
  void PumpUpstreamTcp(uint64_t id, uint32_t events);
  bool IsAnswerTo(const Pending& pending, std::span<const uint8_t> response) const;
  void AttemptFailed(uint64_t id);
  void Fail(uint64_t id);
  void Complete(uint64_t id, std::span<const uint8_t> response);
  void Finish(uint64_t id, std::vector<uint8_t> response);

  DnsGateConfig config_;
  SocketAddress upstream_;
  UniqueFd epoll_;
  UniqueFd stop_;
  std::vector<Listener> listeners_;
  std::vector<DnsEndpoint> bound_;
  std::unordered_map<uint64_t, TcpClient> tcp_clients_;
  std::unordered_map<uint64_t, Pending> pending_;
  uint64_t next_id_ = 1;  // for TCP clients and pending queries; never reused
  std::vector<uint8_t> buffer_ = std::vector<uint8_t>(kMaxMessage + 1);
  Counters counters_;
};

Status DnsGate::Loop::Watch(int fd, uint32_t events, uint64_t token) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = token;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
    return ErrnoError("epoll_ctl(EPOLL_CTL_ADD)", errno);
  }
  return OkStatus();
}

void DnsGate::Loop::Rewatch(int fd, uint32_t events, uint64_t token) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = token;
  // Cannot fail for a descriptor that is registered; nothing to do if it somehow did.
  (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &event);
}

Status DnsGate::Loop::Open() {
  const std::string context = fmt::format("DNS gate for run {}", config_.run_id);
  if (!config_.admit) {
    return InvalidArgumentError(fmt::format("{}: no admit callback", context));
  }
  if (config_.listen.empty()) {
    return InvalidArgumentError(fmt::format("{}: no listen address", context));
  }
  if (config_.max_in_flight == 0 || config_.upstream_timeout.count() <= 0) {
    return InvalidArgumentError(
        fmt::format("{}: max_in_flight and upstream_timeout must be positive", context));
  }
  ASSIGN_OR_RETURN(upstream_, ToSocketAddress(config_.upstream, "upstream"));

  epoll_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return ErrnoError("epoll_create1", errno);
  stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_.valid()) return ErrnoError("eventfd", errno);
  RETURN_IF_ERROR(Watch(stop_.get(), EPOLLIN, Token(Kind::kStop, 0)));

  for (const DnsEndpoint& endpoint : config_.listen) {
    ASSIGN_OR_RETURN(SocketAddress address, ToSocketAddress(endpoint, "listen"));
    // Port 0: the kernel picks the UDP port, and TCP must get the same one. Another socket may
    // hold that TCP port already, so try a few times.
    const int tries = endpoint.port == 0 ? 16 : 1;
    Listener listener;
    DnsEndpoint bound = endpoint;
    for (int attempt = 1;; ++attempt) {
      SetPort(address, endpoint.port);
      ASSIGN_OR_RETURN(listener.udp, MakeSocket(address.family, SOCK_DGRAM, "SOCK_DGRAM"));
      if (::bind(listener.udp.get(), address.get(), address.length) != 0) {
        return ErrnoError(fmt::format("bind({}/udp)", endpoint.ToString()), errno);
      }
      socklen_t length = sizeof(address.storage);
      if (::getsockname(listener.udp.get(), reinterpret_cast<sockaddr*>(&address.storage),
                        &length) != 0) {
        return ErrnoError("getsockname", errno);
      }
      bound.port = PortOf(address);
      ASSIGN_OR_RETURN(listener.tcp, MakeSocket(address.family, SOCK_STREAM, "SOCK_STREAM"));
      int one = 1;
      if (::setsockopt(listener.tcp.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
        return ErrnoError("setsockopt(SO_REUSEADDR)", errno);
      }
      if (::bind(listener.tcp.get(), address.get(), address.length) == 0) break;
      const int err = errno;
      if (err != EADDRINUSE || attempt >= tries) {
        return ErrnoError(fmt::format("bind({}/tcp)", bound.ToString()), err);
      }
    }
    if (::listen(listener.tcp.get(), 128) != 0) {
      return ErrnoError(fmt::format("listen({}/tcp)", bound.ToString()), errno);
    }
    const size_t index = listeners_.size();
    RETURN_IF_ERROR(Watch(listener.udp.get(), EPOLLIN, Token(Kind::kUdpListener, index)));
    RETURN_IF_ERROR(Watch(listener.tcp.get(), EPOLLIN, Token(Kind::kTcpListener, index)));
    listeners_.push_back(std::move(listener));
    bound_.push_back(bound);
  }
  return OkStatus();
}

void DnsGate::Loop::RequestStop() {
  const uint64_t one = 1;
  // The eventfd counter cannot overflow from a handful of writes; a failure leaves nothing to do.
  (void)::write(stop_.get(), &one, sizeof(one));
}

void DnsGate::Loop::Close() {
  pending_.clear();
  tcp_clients_.clear();
  listeners_.clear();
  stop_.reset();
  epoll_.reset();
}

DnsGate::Stats DnsGate::Loop::stats() const {
  Stats s;
  s.queries = counters_.queries.load();
  s.refused = counters_.refused.load();
  s.forwarded = counters_.forwarded.load();
  s.admitted_addresses = counters_.admitted_addresses.load();
  s.admit_failures = counters_.admit_failures.load();
  s.upstream_failures = counters_.upstream_failures.load();
  s.dropped = counters_.dropped.load();
  return s;
}

void DnsGate::Loop::Run() {
  std::array<epoll_event, 64> events;
  for (;;) {
    const int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()),
                               NextTimeoutMs(Clock::now()));
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EBADF/EINVAL: the loop's own state is broken; nothing sensible is left to do
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t token = events[static_cast<size_t>(i)].data.u64;
      const uint32_t mask = events[static_cast<size_t>(i)].events;
      switch (TokenKind(token)) {
        case Kind::kStop:
          return;
        case Kind::kUdpListener:
          OnUdpReadable(TokenId(token));
          break;
        case Kind::kTcpListener:
          OnTcpAcceptable(TokenId(token));
          break;
        case Kind::kTcpClient:
          OnTcpClientEvent(TokenId(token), mask);
          break;
        case Kind::kUpstream:
          OnUpstreamEvent(TokenId(token), mask);
          break;
      }
    }
    OnTimers(Clock::now());
  }
}

int DnsGate::Loop::NextTimeoutMs(Clock::time_point now) const {
  std::optional<Clock::time_point> next;
  auto consider = [&next](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  for (const auto& [id, pending] : pending_) consider(pending.deadline);
  for (const auto& [id, client] : tcp_clients_) {
    if (client.pending == 0) consider(client.last_active + config_.tcp_idle_timeout);
  }
  for (const Listener& listener : listeners_) {
    if (listener.accept_resume) consider(*listener.accept_resume);
  }
  if (!next) return -1;
  if (*next <= now) return 0;
  // Round up, so that the loop does not wake a moment early and spin until the deadline.
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*next - now);
  return static_cast<int>(std::min<int64_t>(wait.count(), 60'000));
}

void DnsGate::Loop::OnTimers(Clock::time_point now) {
  std::vector<uint64_t> expired;
  for (const auto& [id, pending] : pending_) {
    if (pending.deadline <= now) expired.push_back(id);
  }
  for (uint64_t id : expired) AttemptFailed(id);

  std::vector<uint64_t> idle;
  for (const auto& [id, client] : tcp_clients_) {
    if (client.pending == 0 && client.last_active + config_.tcp_idle_timeout <= now) {
      idle.push_back(id);
    }
  }
  for (uint64_t id : idle) CloseTcpClient(id);

  for (size_t i = 0; i < listeners_.size(); ++i) {
    Listener& listener = listeners_[i];
    if (listener.accept_resume && *listener.accept_resume <= now) {
      listener.accept_resume.reset();
      Rewatch(listener.tcp.get(), EPOLLIN, Token(Kind::kTcpListener, i));
    }
  }
}

void DnsGate::Loop::OnUdpReadable(size_t index) {
  for (int i = 0; i < kUdpBatch; ++i) {
    Client client;
    client.listener = index;
    socklen_t length = sizeof(client.address.storage);
    const ssize_t n = ::recvfrom(listeners_[index].udp.get(), buffer_.data(), buffer_.size(), 0,
                                 reinterpret_cast<sockaddr*>(&client.address.storage), &length);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: drained; anything else is a per-datagram error with nothing to answer
    }
    client.address.length = length;
    client.address.family = client.address.storage.ss_family;
    HandleMessage(std::span<const uint8_t>(buffer_.data(), static_cast<size_t>(n)), client);
  }
}

void DnsGate::Loop::OnTcpAcceptable(size_t index) {
  Listener& listener = listeners_[index];
  for (;;) {
    UniqueFd fd(::accept4(listener.tcp.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // EMFILE, ENFILE, ENOBUFS...: rest a while rather than spin on the ready listener.
      listener.accept_resume = Clock::now() + kAcceptPause;
      Rewatch(listener.tcp.get(), 0, Token(Kind::kTcpListener, index));
      return;
    }
    if (tcp_clients_.size() >= config_.max_tcp_clients) {
      ++counters_.dropped;
      continue;  // closed as it goes out of scope
    }
    const uint64_t id = next_id_++;
    if (!Watch(fd.get(), EPOLLIN, Token(Kind::kTcpClient, id)).ok()) {
      ++counters_.dropped;
      continue;
    }
    TcpClient client;
    client.fd = std::move(fd);
    client.last_active = Clock::now();
    tcp_clients_.emplace(id, std::move(client));
  }
}

void DnsGate::Loop::OnTcpClientEvent(uint64_t id, uint32_t events) {
  auto it = tcp_clients_.find(id);
  if (it == tcp_clients_.end()) return;
  if ((events & EPOLLOUT) != 0) {
    FlushTcpClient(id);
    it = tcp_clients_.find(id);
    if (it == tcp_clients_.end()) return;
  }
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) == 0) return;
  if (it->second.read_closed) {
    // Not watching for input any more: only a reset or a full close gets here.
    CloseTcpClient(id);
    return;
  }

  const ssize_t n = ::recv(it->second.fd.get(), buffer_.data(), buffer_.size(), 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n < 0) {
    CloseTcpClient(id);
    return;
  }
  TcpClient& client = it->second;
  if (n == 0) {
    // RFC 7766 §6.2.4 lets a client half-close after its last query: answer what it asked
    // first. FlushTcpClient closes the connection once nothing is pending or unsent.
    client.read_closed = true;
    FlushTcpClient(id);
    return;
  }
  client.last_active = Clock::now();
  client.in.insert(client.in.end(), buffer_.begin(), buffer_.begin() + n);
  // Each message is a 2-byte length and that many bytes (RFC 1035 §4.2.2), several per connection.
  for (;;) {
    it = tcp_clients_.find(id);
    if (it == tcp_clients_.end()) return;
    std::vector<uint8_t>& in = it->second.in;
    if (in.size() < 2) return;
    const size_t length = (static_cast<size_t>(in[0]) << 8) | in[1];
    if (length == 0) {
      ++counters_.dropped;
      CloseTcpClient(id);
      return;
    }
    if (in.size() < 2 + length) return;
    std::vector<uint8_t> message(in.begin() + 2, in.begin() + 2 + static_cast<ptrdiff_t>(length));
    in.erase(in.begin(), in.begin() + 2 + static_cast<ptrdiff_t>(length));
    Client reply_to;
    reply_to.tcp = true;
    reply_to.connection = id;
    HandleMessage(message, reply_to);
  }
}

void DnsGate::Loop::CloseTcpClient(uint64_t id) {
  // Closing the descriptor removes it from the epoll set; it is never dup'ed.
  tcp_clients_.erase(id);
}

void DnsGate::Loop::FlushTcpClient(uint64_t id) {
  auto it = tcp_clients_.find(id);
  if (it == tcp_clients_.end()) return;
  TcpClient& client = it->second;
  while (client.out_sent < client.out.size()) {
    const ssize_t n = ::send(client.fd.get(), client.out.data() + client.out_sent,
                             client.out.size() - client.out_sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      CloseTcpClient(id);
      return;
    }
    client.out_sent += static_cast<size_t>(n);
  }
  if (client.out_sent == client.out.size()) {
    client.out.clear();
    client.out_sent = 0;
  }
  if (client.read_closed && client.pending == 0 && client.out.empty()) {
    CloseTcpClient(id);
    return;
  }
  const uint32_t want = (client.read_closed ? 0u : static_cast<uint32_t>(EPOLLIN)) |
                        (client.out.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
  if (want != client.watched) {
    client.watched = want;
    Rewatch(client.fd.get(), want, Token(Kind::kTcpClient, id));
  }
}

void DnsGate::Loop::Reply(const Client& client, std::vector<uint8_t> response) {
  if (response.size() > kMaxMessage) return;
  if (!client.tcp) {
    if (response.size() > client.max_udp_response) {
      // Too big for this client over UDP: an empty answer with TC set sends it to TCP.
      std::vector<uint8_t> truncated = BuildDnsResponse(response, DnsRcode(response[3]), {});
      if (truncated.size() >= 4) truncated[2] |= static_cast<uint8_t>(kDnsFlagTc >> 8);
      // BuildDnsResponse echoes RD/CD and sets QR/RA; AA and AD of the original are dropped.
      response = std::move(truncated);
    }
    // A full socket buffer loses the datagram, as UDP may; the client asks again.
    if (::sendto(listeners_[client.listener].udp.get(), response.data(), response.size(),
                 MSG_NOSIGNAL, client.address.get(), client.address.length) < 0) {
      ++counters_.dropped;
    }
    return;
  }
  auto it = tcp_clients_.find(client.connection);
  if (it == tcp_clients_.end()) return;  // the client went away meanwhile
  TcpClient& tcp = it->second;
  if (tcp.out.size() + response.size() + 2 > kMaxTcpOutput) {
    ++counters_.dropped;
    CloseTcpClient(client.connection);
    return;
  }
  tcp.out.push_back(static_cast<uint8_t>(response.size() >> 8));
  tcp.out.push_back(static_cast<uint8_t>(response.size() & 0xFF));
  tcp.out.insert(tcp.out.end(), response.begin(), response.end());
  tcp.last_active = Clock::now();
  FlushTcpClient(client.connection);
}

void DnsGate::Loop::Refuse(std::span<const uint8_t> message, const DnsQuery& query,
                           const Client& client) {
  ++counters_.refused;
  if (config_.on_refused) config_.on_refused(query.name, query.qtype);
  Reply(client, BuildDnsError(message, kDnsRcodeRefused));
}

void DnsGate::Loop::HandleMessage(std::span<const uint8_t> message, const Client& client_in) {
  if (message.size() < kDnsHeaderSize || (message[2] & 0x80) != 0) {
    // Too short to answer, or a response: answering responses could set two resolvers
    // answering each other forever.
    ++counters_.dropped;
    return;
  }
  const uint16_t flags = static_cast<uint16_t>((message[2] << 8) | message[3]);
  if (DnsOpcode(flags) != 0) {
    ++counters_.dropped;
    Reply(client_in, BuildDnsError(message, kDnsRcodeNotImp));
    return;
  }
  auto parsed = ParseDnsQuery(message);
  if (!parsed.ok()) {
    ++counters_.dropped;
    Reply(client_in, BuildDnsError(message, kDnsRcodeFormErr));
    return;
  }
  DnsQuery& query = *parsed;
  ++counters_.queries;
  Client client = client_in;
  client.max_udp_response = query.max_udp_response;

  if (query.qclass != kDnsClassIn || query.qtype == kDnsTypeAxfr || query.qtype == kDnsTypeIxfr) {
    Refuse(message, query, client);
    return;
  }
  std::vector<std::optional<uint16_t>> ports;
  for (const AllowlistEntry& entry : config_.allowlist) {
    if (entry.is_name() && entry.MatchesName(query.name)) ports.push_back(entry.port);
  }
  if (ports.empty()) {
    Refuse(message, query, client);
    return;
  }
  if (pending_.size() >= config_.max_in_flight) {
    ++counters_.dropped;
    Reply(client, BuildDnsError(message, kDnsRcodeServFail));
    return;
  }

  const uint64_t id = next_id_++;
  Pending pending;
  pending.client = client;
  pending.query.assign(message.begin(), message.end());
  pending.question = std::move(query);
  pending.ports = std::move(ports);
  pending_.emplace(id, std::move(pending));
  if (client.tcp) {
    auto conn = tcp_clients_.find(client.connection);
    if (conn != tcp_clients_.end()) ++conn->second.pending;
  }
  ++counters_.forwarded;
  SendUdpAttempt(id);
}

Status DnsGate::Loop::TryUdpAttempt(Pending& pending, uint64_t id) {
  pending.upstream.reset();
  ++pending.udp_attempts;
  pending.deadline = Clock::now() + config_.upstream_timeout;
  // A connected socket of its own: only the upstream's address can answer into it, and an ICMP
  // error (nothing listening) surfaces as ECONNREFUSED at once instead of a timeout.
  ASSIGN_OR_RETURN(pending.upstream, MakeSocket(upstream_.family, SOCK_DGRAM, "SOCK_DGRAM"));
  if (::connect(pending.upstream.get(), upstream_.get(), upstream_.length) != 0) {
    return ErrnoError(fmt::format("connect({}/udp)", config_.upstream.ToString()), errno);
  }
  pending.upstream_id = RandomId();
  const std::vector<uint8_t> query = WithDnsId(pending.query, pending.upstream_id);
  if (::send(pending.upstream.get(), query.data(), query.size(), MSG_NOSIGNAL) < 0) {
    return ErrnoError(fmt::format("send({}/udp)", config_.upstream.ToString()), errno);
  }
  return Watch(pending.upstream.get(), EPOLLIN, Token(Kind::kUpstream, id));
}

void DnsGate::Loop::SendUdpAttempt(uint64_t id) {
  for (;;) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    if (TryUdpAttempt(it->second, id).ok()) return;
    if (it->second.udp_attempts >= kUdpAttempts) {
      Fail(id);
      return;
    }
  }
}

Status DnsGate::Loop::TryTcpAttempt(Pending& pending, uint64_t id) {
  pending.upstream.reset();
  pending.over_tcp = true;
  pending.deadline = Clock::now() + config_.upstream_timeout;
  ASSIGN_OR_RETURN(pending.upstream, MakeSocket(upstream_.family, SOCK_STREAM, "SOCK_STREAM"));
  if (::connect(pending.upstream.get(), upstream_.get(), upstream_.length) != 0 &&
      errno != EINPROGRESS) {
    return ErrnoError(fmt::format("connect({}/tcp)", config_.upstream.ToString()), errno);
  }
  pending.upstream_id = RandomId();
  const std::vector<uint8_t> query = WithDnsId(pending.query, pending.upstream_id);
  pending.tcp_out.clear();
  pending.tcp_out.push_back(static_cast<uint8_t>(query.size() >> 8));
  pending.tcp_out.push_back(static_cast<uint8_t>(query.size() & 0xFF));
  pending.tcp_out.insert(pending.tcp_out.end(), query.begin(), query.end());
  pending.tcp_out_sent = 0;
  pending.tcp_in.clear();
  return Watch(pending.upstream.get(), EPOLLIN | EPOLLOUT, Token(Kind::kUpstream, id));
}

void DnsGate::Loop::StartTcpAttempt(uint64_t id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  if (!TryTcpAttempt(it->second, id).ok()) Fail(id);
}

bool DnsGate::Loop::IsAnswerTo(const Pending& pending, std::span<const uint8_t> response) const {
  auto parsed = ParseDnsResponseQuestion(response);
  return parsed.ok() && parsed->id == pending.upstream_id &&
         parsed->name == pending.question.name && parsed->qtype == pending.question.qtype &&
         parsed->qclass == pending.question.qclass;
}

void DnsGate::Loop::OnUpstreamEvent(uint64_t id, uint32_t events) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  if (it->second.over_tcp) {
    PumpUpstreamTcp(id, events);
  } else {
    ReadUpstreamUdp(id);
  }
}

void DnsGate::Loop::ReadUpstreamUdp(uint64_t id) {
  for (;;) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    Pending& pending = it->second;
    const ssize_t n = ::recv(pending.upstream.get(), buffer_.data(), buffer_.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      AttemptFailed(id);  // ECONNREFUSED: nothing listens at the upstream address
      return;
    }
    const std::span<const uint8_t> response(buffer_.data(), static_cast<size_t>(n));
    // Anything that is not the answer to this attempt's question and id is ignored: a stale
    // answer to an earlier attempt, or a spoofing try. The deadline still runs.
    if (!IsAnswerTo(pending, response)) continue;
    if ((response[2] & (kDnsFlagTc >> 8)) != 0) {
      StartTcpAttempt(id);
      return;
    }
    Complete(id, response);
    return;
  }
}

void DnsGate::Loop::PumpUpstreamTcp(uint64_t id, uint32_t events) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Pending& pending = it->second;
  if ((events & EPOLLERR) != 0) {
    Fail(id);
    return;
  }
  if (pending.tcp_out_sent < pending.tcp_out.size() && (events & (EPOLLOUT | EPOLLHUP)) != 0) {
    while (pending.tcp_out_sent < pending.tcp_out.size()) {
      const ssize_t n =
          ::send(pending.upstream.get(), pending.tcp_out.data() + pending.tcp_out_sent,
                 pending.tcp_out.size() - pending.tcp_out_sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        Fail(id);
        return;
      }
      pending.tcp_out_sent += static_cast<size_t>(n);
    }
    Rewatch(pending.upstream.get(), EPOLLIN, Token(Kind::kUpstream, id));
  }
  if ((events & (EPOLLIN | EPOLLHUP)) == 0) return;
  for (;;) {
    const ssize_t n = ::recv(pending.upstream.get(), buffer_.data(), buffer_.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      Fail(id);
      return;
    }
    if (n == 0) {
      Fail(id);  // closed before a whole answer arrived
      return;
    }
    pending.tcp_in.insert(pending.tcp_in.end(), buffer_.begin(), buffer_.begin() + n);
    if (pending.tcp_in.size() < 2) continue;
    const size_t length = (static_cast<size_t>(pending.tcp_in[0]) << 8) | pending.tcp_in[1];
    if (pending.tcp_in.size() < 2 + length) continue;
    const std::vector<uint8_t> response(
        pending.tcp_in.begin() + 2, pending.tcp_in.begin() + 2 + static_cast<ptrdiff_t>(length));
    if (!IsAnswerTo(pending, response)) {
      Fail(id);  // over a connection of our own, a wrong answer is not noise but a broken upstream
      return;
    }
    Complete(id, response);
    return;
  }
}

void DnsGate::Loop::AttemptFailed(uint64_t id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  if (!it->second.over_tcp && it->second.udp_attempts < kUdpAttempts) {
    SendUdpAttempt(id);
  } else {
    Fail(id);
  }
}

void DnsGate::Loop::Fail(uint64_t id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  ++counters_.upstream_failures;
  Finish(id, BuildDnsError(it->second.query, kDnsRcodeServFail));
}

void DnsGate::Loop::Complete(uint64_t id, std::span<const uint8_t> response) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Pending& pending = it->second;
  const DnsQuery& question = pending.question;
  std::vector<AdmittedAddress> admitted;
  const uint16_t flags = static_cast<uint16_t>((response[2] << 8) | response[3]);
  if (DnsRcode(flags) == kDnsRcodeNoError &&
      (question.qtype == kDnsTypeA || question.qtype == kDnsTypeAaaa)) {
    auto addresses = ExtractAnswerAddresses(response, question.name);
    if (!addresses.ok()) {
      Fail(id);  // a malformed answer: nothing in it can be admitted, so none of it is passed on
      return;
    }
    for (const DnsAddress& address : *addresses) {
      for (const std::optional<uint16_t>& port : pending.ports) {
        admitted.push_back({question.name, address.family, address.bytes, address.ttl, port});
      }
    }
  }
  if (!admitted.empty()) {
    // Admission comes first: the run must never hold an address the firewall has not admitted.
    if (!config_.admit(admitted).ok()) {
      ++counters_.admit_failures;
      Finish(id, BuildDnsError(pending.query, kDnsRcodeServFail));
      return;
    }
    counters_.admitted_addresses += admitted.size();
  }
  Finish(id, WithDnsId(response, question.id));
}

void DnsGate::Loop::Finish(uint64_t id, std::vector<uint8_t> response) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  const Client client = it->second.client;
  pending_.erase(it);  // closes the upstream socket
  if (client.tcp) {
    auto conn = tcp_clients_.find(client.connection);
    if (conn != tcp_clients_.end() && conn->second.pending > 0) --conn->second.pending;
  }
  Reply(client, std::move(response));
}

DnsGate::DnsGate(std::unique_ptr<Loop> loop, std::vector<DnsEndpoint> bound)
    : loop_(std::move(loop)), bound_(std::move(bound)) {}

Result<std::unique_ptr<DnsGate>> DnsGate::Start(DnsGateConfig config) {
  auto loop = std::make_unique<Loop>(std::move(config));
  RETURN_IF_ERROR(loop->Open());
  std::vector<DnsEndpoint> bound = loop->bound();
  std::unique_ptr<DnsGate> gate(new DnsGate(std::move(loop), std::move(bound)));
  gate->thread_ = std::thread([loop_ptr = gate->loop_.get()] { loop_ptr->Run(); });
  return gate;
}

DnsGate::~DnsGate() { Stop(); }

void DnsGate::Stop() {
  if (!thread_.joinable()) return;
  loop_->RequestStop();
  thread_.join();
  loop_->Close();  // frees the listen addresses at once, for a gate started in this one's place
}

DnsGate::Stats DnsGate::stats() const { return loop_->stats(); }

}  // namespace codespace
