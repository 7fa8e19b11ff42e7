#include "harness/fake_internet.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "base/file_util.h"
#include "harness/netns_util.h"

namespace codespace::lanes {

// ---------------------------------------------------------------------------------------------
// What the servers saw.

struct FakeInternet::Observations {
  mutable std::mutex mu;
  std::vector<DnsQuerySeen> dns;
  std::vector<HttpRequestSeen> http;
  std::vector<ContactSeen> contacts;
};

namespace {

// ---------------------------------------------------------------------------------------------
// Addresses.

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

Result<SocketAddress> ParseAddress(const std::string& address, int port) {
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    a.len = sizeof(*v4);
  } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    a.len = sizeof(*v6);
  } else {
    return InvalidArgumentError(fmt::format("not an IP address: {}", address));
  }
  return a;
}

// The address alone ("203.0.113.10", "2001:db8:1::10") and the port of a sockaddr.
std::pair<std::string, int> AddressAndPort(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
    return {buf, ntohs(v4->sin_port)};
  }
  if (ss.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
    return {buf, ntohs(v6->sin6_port)};
  }
  return {"?", 0};
}

std::string HostPort(const std::string& address, int port) {
  return address.find(':') == std::string::npos ? fmt::format("{}:{}", address, port)
                                                : fmt::format("[{}]:{}", address, port);
}

// A non-blocking socket bound to address:port; listening when it is a stream socket.
Result<UniqueFd> BoundSocket(const std::string& address, int port, int type) {
  ASSIGN_OR_RETURN(SocketAddress a, ParseAddress(address, port));
  const char* kind = type == SOCK_STREAM ? "tcp" : "udp";
  UniqueFd fd(::socket(a.family(), type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError(fmt::format("socket({} {})", kind, address), errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (a.family() == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (::bind(fd.get(), a.get(), a.len) != 0) {
    return ErrnoError(fmt::format("bind({} {})", kind, HostPort(address, port)), errno);
  }
  if (type == SOCK_STREAM && ::listen(fd.get(), 128) != 0) {
    return ErrnoError(fmt::format("listen({})", HostPort(address, port)), errno);
  }
  return fd;
}

// Writes a sysctl of the calling thread's network namespace and reads it back: the written
// value is trusted only once read (procps's `sysctl -w` can exit 0 without writing).
Status WriteNetSysctl(const std::string& path, std::string_view value) {
  {
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path.c_str(), O_WRONLY | O_TRUNC));
    RETURN_IF_ERROR(WriteAll(fd.get(), fmt::format("{}\n", value)).WithContext(path));
  }
  ASSIGN_OR_RETURN(std::string back, ReadFileToString(path));
  while (!back.empty() && back.back() == '\n') back.pop_back();
  if (back != value) {
    return InternalError(fmt::format("{} reads {} after writing {}", path, back, value));
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// The authoritative DNS answering: one question in, one response out. Just enough of RFC 1035
// for the zone in the header; anything it cannot parse is dropped or answered FORMERR.

constexpr uint16_t kTypeA = 1;
constexpr uint16_t kTypeCname = 5;
constexpr uint16_t kTypeAaaa = 28;
constexpr uint16_t kRcodeNoError = 0;
constexpr uint16_t kRcodeFormErr = 1;
constexpr uint16_t kRcodeNxDomain = 3;
constexpr uint16_t kRcodeNotImp = 4;

enum class Zone { kNone, kAuthoritative, kAnswersEverything };

struct ZoneEntry {
  const char* name;  // "*.suffix" matches every name below suffix
  uint16_t type;
  const char* value;  // an address, or the CNAME target
  uint32_t ttl;
};

constexpr ZoneEntry kZone[] = {
    {kAllowedName, kTypeA, kAllowedV4, kDefaultTtl},
    {kAllowedName, kTypeAaaa, kAllowedV6, kDefaultTtl},
    {kDeniedName, kTypeA, kDeniedV4, kDefaultTtl},
    {kDeniedName, kTypeAaaa, kDeniedV6, kDefaultTtl},
    {"*.wild.test", kTypeA, kWildV4, kDefaultTtl},
    {kAliasName, kTypeCname, kAllowedName, kDefaultTtl},
    {kShortTtlName, kTypeA, kAllowedV4, kShortTtl},
};

bool ZoneNameMatches(std::string_view pattern, std::string_view name) {
  if (pattern.substr(0, 2) != "*.") return pattern == name;
  std::string_view suffix = pattern.substr(1);  // ".wild.test"
  return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

void PutU16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}
void PutU32(std::string& out, uint32_t v) {
  PutU16(out, static_cast<uint16_t>(v >> 16));
  PutU16(out, static_cast<uint16_t>(v & 0xffff));
}
uint16_t GetU16(std::string_view in, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(in[at]) << 8) |
                               static_cast<uint8_t>(in[at + 1]));
}

std::string EncodeName(std::string_view name) {
  std::string out;
  while (!name.empty()) {
    size_t dot = name.find('.');
    std::string_view label = name.substr(0, dot);
    out.push_back(static_cast<char>(label.size()));
    out.append(label);
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
  }
  out.push_back('\0');
  return out;
}

struct ResourceRecord {
  std::string owner;
  uint16_t type;
  uint32_t ttl;
  std::string rdata;
};

std::string AddressBytes(const char* address, uint16_t type) {
  unsigned char buf[16] = {0};
  int family = type == kTypeA ? AF_INET : AF_INET6;
  ::inet_pton(family, address, buf);
  return std::string(reinterpret_cast<const char*>(buf), type == kTypeA ? 4 : 16);
}

// Answers `name`/`qtype` from the zone: the rcode and the answer records (CNAMEs followed).
uint16_t LookUp(const std::string& name, uint16_t qtype, int depth,
                std::vector<ResourceRecord>& answers) {
  bool exists = false;
  for (const ZoneEntry& e : kZone) {
    if (!ZoneNameMatches(e.name, name)) continue;
    exists = true;
    if (e.type == kTypeCname && qtype != kTypeCname && depth < 8) {
      answers.push_back({name, kTypeCname, e.ttl, EncodeName(e.value)});
      return LookUp(e.value, qtype, depth + 1, answers);
    }
    if (e.type != qtype) continue;
    answers.push_back({name, e.type, e.ttl,
                       e.type == kTypeCname ? EncodeName(e.value) : AddressBytes(e.value, e.type)});
  }
  return exists ? kRcodeNoError : kRcodeNxDomain;
}

// The response to one DNS message, or nullopt when it is not worth one (a response, garbage).
std::optional<std::string> AnswerDns(std::string_view query, Zone zone, DnsQuerySeen& seen) {
  if (query.size() < 12) return std::nullopt;
  const uint16_t flags = GetU16(query, 2);
  if (flags & 0x8000) return std::nullopt;  // a response: never answer those
  const uint16_t opcode = (flags >> 11) & 0xf;
  auto header = [&](uint16_t rcode, uint16_t qd, uint16_t an) {
    std::string out;
    PutU16(out, GetU16(query, 0));  // id
    PutU16(out, static_cast<uint16_t>(0x8000 | (opcode << 11) | 0x0400 /*AA*/ |
                                      (flags & 0x0100) /*RD*/ | 0x0080 /*RA*/ | rcode));
    PutU16(out, qd);
    PutU16(out, an);
    PutU16(out, 0);
    PutU16(out, 0);
    return out;
  };
  if (GetU16(query, 4) != 1) return header(kRcodeFormErr, 0, 0);
  // The question's name: plain labels (a question has nothing to point back to).
  std::string name;
  size_t at = 12;
  for (;;) {
    if (at >= query.size()) return header(kRcodeFormErr, 0, 0);
    const auto len = static_cast<uint8_t>(query[at]);
    if (len == 0) {
      ++at;
      break;
    }
    if (len > 63 || at + 1 + len > query.size()) return header(kRcodeFormErr, 0, 0);
    if (!name.empty()) name.push_back('.');
    for (char c : query.substr(at + 1, len)) {
      name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    at += 1 + len;
  }
  if (at + 4 > query.size()) return header(kRcodeFormErr, 0, 0);
  const uint16_t qtype = GetU16(query, at);
  const std::string_view question = query.substr(12, at + 4 - 12);
  seen.name = name;
  seen.type = qtype;
  if (opcode != 0) return header(kRcodeNotImp, 1, 0).append(question);

  std::vector<ResourceRecord> answers;
  uint16_t rcode = LookUp(name, qtype, 0, answers);
  if (rcode == kRcodeNxDomain && zone == Zone::kAnswersEverything) {
    rcode = kRcodeNoError;
    if (qtype == kTypeA)
      answers.push_back({name, kTypeA, kDefaultTtl, AddressBytes(kDeniedV4, kTypeA)});
    if (qtype == kTypeAaaa) {
      answers.push_back({name, kTypeAaaa, kDefaultTtl, AddressBytes(kDeniedV6, kTypeAaaa)});
    }
  }
  std::string out = header(rcode, 1, static_cast<uint16_t>(answers.size()));
  out.append(question);
  for (const ResourceRecord& rr : answers) {
    out += EncodeName(rr.owner);
    PutU16(out, rr.type);
    PutU16(out, 1);  // IN
    PutU32(out, rr.ttl);
    PutU16(out, static_cast<uint16_t>(rr.rdata.size()));
    out += rr.rdata;
  }
  return out;
}

std::string HttpResponse(const std::string& label, const std::string& local, int port) {
  std::string body = fmt::format("{} {}\n", label, HostPort(local, port));
  return fmt::format(
      "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n"
      "\r\n{}",
      body.size(), body);
}

enum class Service { kHttp, kTcpEcho, kUdpEcho, kDnsUdp, kDnsTcp };

bool IsStream(Service s) {
  return s == Service::kHttp || s == Service::kTcpEcho || s == Service::kDnsTcp;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// One epoll thread serves every socket, in whichever namespace each was made.

class FakeInternet::ServerLoop {
 public:
  explicit ServerLoop(std::shared_ptr<Observations> obs) : obs_(std::move(obs)) {}
  ~ServerLoop() { Stop(); }

  Status Init() {
    epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_.valid()) return ErrnoError("epoll_create1", errno);
    stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!stop_.valid()) return ErrnoError("eventfd", errno);
    return Watch(stop_.get(), kStopKey, EPOLLIN, EPOLL_CTL_ADD);
  }

  // Serves `fd` (bound, listening if a stream) as `service`. Call before Start.
  Status Add(UniqueFd fd, Service service, Zone zone, std::string label) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      return ErrnoError("getsockname", errno);
    }
    auto [local, port] = AddressAndPort(ss);
    const uint64_t key = next_key_++;
    RETURN_IF_ERROR(Watch(fd.get(), key, EPOLLIN, EPOLL_CTL_ADD));
    listeners_.emplace(key, Listener{std::move(fd), service, zone, std::move(label), local, port});
    return OkStatus();
  }

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }

  // Idempotent: wakes the thread, joins it, closes every socket.
  void Stop() {
    if (thread_.joinable()) {
      uint64_t one = 1;
      ssize_t n = ::write(stop_.get(), &one, sizeof(one));
      (void)n;
      thread_.join();
    }
    conns_.clear();
    listeners_.clear();
    stop_.reset();
    epoll_.reset();
  }

 private:
  struct Listener {
    UniqueFd fd;
    Service service;
    Zone zone;
    std::string label;
    std::string local;
    int port;
  };
  struct Conn {
    uint64_t key;
    UniqueFd fd;
    Service service;
    Zone zone;
    std::string label;
    std::string local;
    int port;
    std::string peer;
    std::string in = {};
    std::string out = {};
    bool reading = true;  // false once the request is complete or the peer shut down
    bool close_after_flush = false;
  };

  // Events carry a key never reused (unlike a descriptor number, which a connection accepted
  // later in the same epoll_wait batch could take over from one closed earlier in it).
  Status Watch(int fd, uint64_t key, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = key;
    if (::epoll_ctl(epoll_.get(), op, fd, &ev) != 0) return ErrnoError("epoll_ctl", errno);
    return OkStatus();
  }

  void Run() {
    epoll_event events[64];
    for (;;) {
      int n = ::epoll_wait(epoll_.get(), events, 64, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      for (int i = 0; i < n; ++i) {
        const uint64_t key = events[i].data.u64;
        if (key == kStopKey) return;
        if (auto l = listeners_.find(key); l != listeners_.end()) {
          if (IsStream(l->second.service)) {
            Accept(l->second);
          } else {
            Datagrams(l->second);
          }
        } else if (auto c = conns_.find(key); c != conns_.end()) {
          Serve(c->second, events[i].events);
        }
      }
    }
  }

  void Accept(Listener& l) {
    for (;;) {
      sockaddr_storage peer{};
      socklen_t len = sizeof(peer);
      UniqueFd fd(::accept4(l.fd.get(), reinterpret_cast<sockaddr*>(&peer), &len,
                            SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) return;  // EAGAIN, or the peer gave up already
      sockaddr_storage local{};
      len = sizeof(local);
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len);
      auto [local_addr, local_port] = AddressAndPort(local);
      std::string peer_addr = AddressAndPort(peer).first;
      {
        std::lock_guard<std::mutex> lock(obs_->mu);
        obs_->contacts.push_back({local_addr, local_port, true, peer_addr});
      }
      const uint64_t key = next_key_++;
      if (!Watch(fd.get(), key, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD).ok()) continue;
      Conn c{key, std::move(fd), l.service, l.zone, l.label, local_addr, local_port, peer_addr};
      conns_.emplace(key, std::move(c));
    }
  }

  void Datagrams(Listener& l) {
    char buf[4096];
    for (;;) {
      sockaddr_storage peer{};
      socklen_t len = sizeof(peer);
      ssize_t n =
          ::recvfrom(l.fd.get(), buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&peer), &len);
      if (n < 0) return;
      std::string peer_addr = AddressAndPort(peer).first;
      std::string reply;
      {
        std::lock_guard<std::mutex> lock(obs_->mu);
        obs_->contacts.push_back({l.local, l.port, false, peer_addr});
      }
      if (l.service == Service::kUdpEcho) {
        reply.assign(buf, static_cast<size_t>(n));
      } else {
        DnsQuerySeen seen{l.local, "", 0, false, peer_addr};
        auto response = AnswerDns(std::string_view(buf, static_cast<size_t>(n)), l.zone, seen);
        RecordDns(seen);
        if (!response) continue;
        reply = std::move(*response);
      }
      ::sendto(l.fd.get(), reply.data(), reply.size(), MSG_DONTWAIT,
               reinterpret_cast<sockaddr*>(&peer), len);
    }
  }

  void RecordDns(const DnsQuerySeen& seen) {
    if (seen.name.empty() && seen.type == 0) return;
    std::lock_guard<std::mutex> lock(obs_->mu);
    obs_->dns.push_back(seen);
  }

  void Serve(Conn& c, uint32_t events) {
    if (events & EPOLLERR) return Close(c);
    if (c.reading && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))) {
      char buf[16384];
      bool eof = false;
      for (;;) {
        ssize_t n = ::read(c.fd.get(), buf, sizeof(buf));
        if (n > 0) {
          c.in.append(buf, static_cast<size_t>(n));
          if (c.in.size() > (1 << 20)) return Close(c);  // nobody sends us that much
          continue;
        }
        if (n == 0) eof = true;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN) return Close(c);
        break;
      }
      Consume(c, eof);
    }
    Flush(c);
  }

  void Consume(Conn& c, bool eof) {
    switch (c.service) {
      case Service::kHttp: {
        if (c.in.empty() && eof) {  // a bare connect: counted as a contact, not a request
          c.reading = false;
          c.close_after_flush = true;
          return;
        }
        size_t end = c.in.find("\r\n\r\n");
        if (end == std::string::npos) end = c.in.find("\n\n");
        if (end == std::string::npos && !eof && c.in.size() < 16384) return;
        std::string line = c.in.substr(0, c.in.find('\n'));
        if (!line.empty() && line.back() == '\r') line.pop_back();
        {
          std::lock_guard<std::mutex> lock(obs_->mu);
          obs_->http.push_back({c.local, c.port, c.peer, line});
        }
        c.out += HttpResponse(c.label, c.local, c.port);
        c.reading = false;
        c.close_after_flush = true;
        return;
      }
      case Service::kTcpEcho:
        c.out += c.in;
        c.in.clear();
        break;
      case Service::kDnsTcp:
        while (c.in.size() >= 2 && c.in.size() >= 2u + GetU16(c.in, 0)) {
          size_t len = GetU16(c.in, 0);
          DnsQuerySeen seen{c.local, "", 0, true, c.peer};
          auto response = AnswerDns(std::string_view(c.in).substr(2, len), c.zone, seen);
          RecordDns(seen);
          c.in.erase(0, 2 + len);
          if (!response) continue;
          PutU16(c.out, static_cast<uint16_t>(response->size()));
          c.out += *response;
        }
        break;
      case Service::kUdpEcho:
      case Service::kDnsUdp:
        break;
    }
    if (eof) {
      c.reading = false;
      c.close_after_flush = true;
    }
  }

  void Flush(Conn& c) {
    while (!c.out.empty()) {
      ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out.erase(0, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      return Close(c);
    }
    if (c.out.empty() && c.close_after_flush) return Close(c);
    uint32_t want = (c.reading ? uint32_t{EPOLLIN | EPOLLRDHUP} : 0u) |
                    (c.out.empty() ? 0u : uint32_t{EPOLLOUT});
    if (!Watch(c.fd.get(), c.key, want, EPOLL_CTL_MOD).ok()) Close(c);
  }

  void Close(Conn& c) { conns_.erase(c.key); }  // the UniqueFd closes it (and unregisters)

  std::shared_ptr<Observations> obs_;
  UniqueFd epoll_;
  UniqueFd stop_;
  static constexpr uint64_t kStopKey = 0;
  uint64_t next_key_ = 1;
  std::unordered_map<uint64_t, Listener> listeners_;
  std::unordered_map<uint64_t, Conn> conns_;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// The topology.

namespace {

std::atomic<int> g_sequence{0};

// Locally administered link addresses for the two ends of the veth.
constexpr char kWorkerUplinkMac[] = "02:c5:00:00:00:02";
constexpr char kInternetMac[] = "02:c5:00:00:00:01";

constexpr const char* kFakeInternetServers[] = {
    kAllowedV4, kAllowedV6, kDeniedV4, kDeniedV6, kWildV4, kDnsServerV4, kOtherResolverV4};

}  // namespace

FakeInternet::FakeInternet() : observations_(std::make_shared<Observations>()) {}

FakeInternet::~FakeInternet() { TearDown().IgnoreError(); }

Result<std::unique_ptr<FakeInternet>> FakeInternet::Create(FakeInternetOptions options) {
  std::unique_ptr<FakeInternet> fi(new FakeInternet());
  Status s = fi->Build(options);
  if (!s.ok()) {
    // Whatever was made goes now; a teardown error is worth more to the reader than nothing.
    Status t = fi->TearDown();
    if (!t.ok()) s = s.WithContext(fmt::format("(and teardown failed: {})", t.message()));
    return s.WithContext("FakeInternet::Create");
  }
  return fi;
}

Status FakeInternet::Build(const FakeInternetOptions& options) {
  const std::string base = fmt::format("{}{}-{}", kHarnessPrefix, ::getpid(), g_sequence++);

  auto address_link = [](const std::string& ns, const char* dev, const char* v4,
                         const char* v6) -> Status {
    RETURN_IF_ERROR(
        RunIp({"-n", ns, "addr", "add", fmt::format("{}/{}", v4, kUplinkPrefixV4), "dev", dev}));
    RETURN_IF_ERROR(RunIp({"-n", ns, "-6", "addr", "add", fmt::format("{}/{}", v6, kUplinkPrefixV6),
                           "dev", dev, "nodad"}));
    return RunIp({"-n", ns, "link", "set", dev, "up"});
  };

  struct BuildStep {
    const char* name;
    std::function<Status()> run;
  };
  const BuildStep steps[] = {
      {"remove stale namespaces", [] { return RemoveStaleHarnessNamespaces().status(); }},
      {"find tools",
       [&]() -> Status {
         std::string path =
             GetEnv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
         RETURN_IF_ERROR(FindExecutable("ip", path).status());
         ASSIGN_OR_RETURN(mount_, FindExecutable("mount", path));
         ASSIGN_OR_RETURN(nsenter_, FindExecutable("nsenter", path));
         ASSIGN_OR_RETURN(unshare_, FindExecutable("unshare", path));
         return OkStatus();
       }},
      {"make scratch dir",
       [&]() -> Status {
         std::string tmpl = fmt::format("/tmp/{}-etc.XXXXXX", base);
         if (!::mkdtemp(tmpl.data())) return ErrnoError(fmt::format("mkdtemp({})", tmpl), errno);
         scratch_dir_ = tmpl;
         // Commands run in the worker host as another uid read the resolv.conf too.
         if (::chmod(scratch_dir_.c_str(), 0755) != 0) {
           return ErrnoError(fmt::format("chmod({}, 0755)", scratch_dir_), errno);
         }
         resolv_conf_ = scratch_dir_ + "/resolv.conf";
         return WriteFileAtomically(
             resolv_conf_,
             fmt::format("nameserver {}\noptions timeout:1 attempts:2\n", kDnsServerV4));
       }},
      {"add worker host netns",
       [&] {
         worker_ns_ = base + "-w";
         return AddNamedNetns(worker_ns_);
       }},
      {"add internet netns",
       [&] {
         internet_ns_ = base + "-i";
         return AddNamedNetns(internet_ns_);
       }},
      // Addresses must be usable at once: no duplicate address detection in either namespace
      // (link-local addresses included), and the fake internet never forwards.
      {"set namespace sysctls",
       [&]() -> Status {
         for (const std::string& ns : {worker_host_netns_path(), internet_netns_path()}) {
           RETURN_IF_ERROR(CallInNetns(ns, [] {
             Status all = WriteNetSysctl("/proc/sys/net/ipv6/conf/all/accept_dad", "0");
             if (!all.ok()) return all;
             return WriteNetSysctl("/proc/sys/net/ipv6/conf/default/accept_dad", "0");
           }));
         }
         return CallInNetns(internet_netns_path(), [] {
           Status v4 = WriteNetSysctl("/proc/sys/net/ipv4/ip_forward", "0");
           if (!v4.ok()) return v4;
           return WriteNetSysctl("/proc/sys/net/ipv6/conf/all/forwarding", "0");
         });
       }},
      {"bring up lo",
       [&]() -> Status {
         RETURN_IF_ERROR(RunIp({"-n", worker_ns_, "link", "set", "lo", "up"}));
         return RunIp({"-n", internet_ns_, "link", "set", "lo", "up"});
       }},
      // Made inside the worker host with its peer placed straight into the fake internet: the
      // pair never exists in the root namespace.
      {"add veth",
       [&] {
         return RunIp({"-n", worker_ns_, "link", "add", kWorkerUplinkInterface, "address",
                       kWorkerUplinkMac, "type", "veth", "peer", "name", kInternetInterface,
                       "address", kInternetMac, "netns", internet_ns_});
       }},
      {"address worker uplink",
       [&] {
         return address_link(worker_ns_, kWorkerUplinkInterface, kWorkerUplinkV4, kWorkerUplinkV6);
       }},
      {"address internet side",
       [&] {
         return address_link(internet_ns_, kInternetInterface, kInternetGatewayV4,
                             kInternetGatewayV6);
       }},
      // Each side knows the other's link address for good: no ARP or neighbour discovery on the
      // link, whose first solicitation a fresh veth can lose (a 1 s stall on the first IPv6
      // connection otherwise).
      {"add neighbours",
       [&]() -> Status {
         for (const char* a : {kInternetGatewayV4, kInternetGatewayV6}) {
           RETURN_IF_ERROR(RunIp({"-n", worker_ns_, "neigh", "replace", a, "lladdr", kInternetMac,
                                  "dev", kWorkerUplinkInterface, "nud", "permanent"}));
         }
         for (const char* a : {kWorkerUplinkV4, kWorkerUplinkV6}) {
           RETURN_IF_ERROR(
               RunIp({"-n", internet_ns_, "neigh", "replace", a, "lladdr", kWorkerUplinkMac, "dev",
                      kInternetInterface, "nud", "permanent"}));
         }
         return OkStatus();
       }},
      {"add default routes",
       [&]() -> Status {
         RETURN_IF_ERROR(RunIp({"-n", worker_ns_, "route", "add", "default", "via",
                                kInternetGatewayV4, "dev", kWorkerUplinkInterface}));
         return RunIp({"-n", worker_ns_, "-6", "route", "add", "default", "via", kInternetGatewayV6,
                       "dev", kWorkerUplinkInterface});
       }},
      {"add server addresses",
       [&]() -> Status {
         std::vector<const char*> all(std::begin(kFakeInternetServers),
                                      std::end(kFakeInternetServers));
         all.push_back(kMetadataV4);
         all.push_back(kMetadataV6);
         for (const char* a : all) {
           bool v6 = std::strchr(a, ':') != nullptr;
           std::vector<std::string> args = {
               "-n",   internet_ns_, v6 ? "-6" : "-4",
               "addr", "add",        fmt::format("{}/{}", a, v6 ? 128 : 32),
               "dev",  "lo"};
           if (v6) args.push_back("nodad");
           RETURN_IF_ERROR(RunIp(args));
         }
         return OkStatus();
       }},
      {"start servers", [&] { return StartServers(); }},
      {"ready", [] { return OkStatus(); }},
  };
  for (const BuildStep& step : steps) {
    if (options.fail_at_step == step.name) {
      return InternalError(fmt::format("{}: injected failure", step.name));
    }
    Status s = step.run();
    if (!s.ok()) return s.WithContext(step.name);
  }
  return OkStatus();
}

Status FakeInternet::StartServers() {
  loop_ = std::make_unique<ServerLoop>(observations_);
  RETURN_IF_ERROR(loop_->Init());
  Status in_internet = CallInNetns(internet_netns_path(), [&]() -> Status {
    for (const char* a : kFakeInternetServers) {
      for (int port : {kHttpPort, kHttpAltPort}) {
        ASSIGN_OR_RETURN(UniqueFd fd, BoundSocket(a, port, SOCK_STREAM));
        RETURN_IF_ERROR(loop_->Add(std::move(fd), Service::kHttp, Zone::kNone, "fake-internet"));
      }
      ASSIGN_OR_RETURN(UniqueFd tcp_echo, BoundSocket(a, kEchoPort, SOCK_STREAM));
      RETURN_IF_ERROR(loop_->Add(std::move(tcp_echo), Service::kTcpEcho, Zone::kNone, ""));
      ASSIGN_OR_RETURN(UniqueFd udp_echo, BoundSocket(a, kEchoPort, SOCK_DGRAM));
      RETURN_IF_ERROR(loop_->Add(std::move(udp_echo), Service::kUdpEcho, Zone::kNone, ""));
    }
    for (const char* a : {kMetadataV4, kMetadataV6}) {
      ASSIGN_OR_RETURN(UniqueFd fd, BoundSocket(a, kHttpPort, SOCK_STREAM));
      RETURN_IF_ERROR(loop_->Add(std::move(fd), Service::kHttp, Zone::kNone, "fake-internet"));
    }
    for (auto [a, zone] : {std::pair{kDnsServerV4, Zone::kAuthoritative},
                           std::pair{kOtherResolverV4, Zone::kAnswersEverything}}) {
      ASSIGN_OR_RETURN(UniqueFd udp, BoundSocket(a, kDnsPort, SOCK_DGRAM));
      RETURN_IF_ERROR(loop_->Add(std::move(udp), Service::kDnsUdp, zone, ""));
      ASSIGN_OR_RETURN(UniqueFd tcp, BoundSocket(a, kDnsPort, SOCK_STREAM));
      RETURN_IF_ERROR(loop_->Add(std::move(tcp), Service::kDnsTcp, zone, ""));
    }
    return OkStatus();
  });
  RETURN_IF_ERROR(in_internet);
  Status in_worker_host = CallInNetns(worker_host_netns_path(), [&]() -> Status {
    for (auto [a, port] :
         {std::pair{"0.0.0.0", kWorkerServicePort}, std::pair{"::", kWorkerServicePort},
          std::pair{"127.0.0.1", kWorkerLoopbackServicePort}}) {
      ASSIGN_OR_RETURN(UniqueFd fd, BoundSocket(a, port, SOCK_STREAM));
      RETURN_IF_ERROR(loop_->Add(std::move(fd), Service::kHttp, Zone::kNone, "worker-host"));
    }
    return OkStatus();
  });
  RETURN_IF_ERROR(in_worker_host);
  loop_->Start();
  return OkStatus();
}

Status FakeInternet::TearDown() {
  if (torn_down_) return OkStatus();
  // Sockets first: an open socket keeps its namespace (and so the veth) alive after the name goes.
  if (loop_) loop_->Stop();
  loop_.reset();
  Status result;
  for (const std::string& ns : {worker_ns_, internet_ns_}) {
    if (ns.empty()) continue;
    Status s = DeleteNamedNetns(ns);
    if (!s.ok() && result.ok()) result = s;
  }
  if (!scratch_dir_.empty()) {
    Status s = RemoveTree(scratch_dir_);
    if (!s.ok() && result.ok()) result = s;
  }
  // A failed removal is retried by the next TearDown call, and after this process is gone by
  // RemoveStaleHarnessNamespaces.
  torn_down_ = result.ok();
  return result;
}

std::string FakeInternet::worker_host_netns_path() const { return NamedNetnsPath(worker_ns_); }
std::string FakeInternet::internet_netns_path() const { return NamedNetnsPath(internet_ns_); }

std::vector<std::string> FakeInternet::WorkerHostArgv(std::vector<std::string> argv,
                                                      WorkerResolvConf resolv) const {
  std::vector<std::string> out = {nsenter_, "--net=" + worker_host_netns_path(), "--"};
  if (resolv == WorkerResolvConf::kFakeDns) {
    // A mount namespace of its own, slave to ours: the bind mount never shows outside it.
    out.insert(out.end(), {unshare_, "--mount", "--propagation", "slave", "--", "/bin/sh", "-c",
                           "\"$0\" --bind \"$1\" /etc/resolv.conf && shift && exec \"$@\"", mount_,
                           resolv_conf_});
  }
  out.insert(out.end(), std::make_move_iterator(argv.begin()), std::make_move_iterator(argv.end()));
  return out;
}

Result<CommandOutput> FakeInternet::RunInWorkerHost(std::vector<std::string> argv,
                                                    std::optional<std::vector<std::string>> env,
                                                    WorkerResolvConf resolv) const {
  if (torn_down_ || worker_ns_.empty()) return FailedPreconditionError("FakeInternet is torn down");
  return RunCommand(WorkerHostArgv(std::move(argv), resolv), std::move(env));
}

Status FakeInternet::SetWorkerHostForwarding(bool on) const {
  return CallInNetns(worker_host_netns_path(), [on] {
    RETURN_IF_ERROR(WriteNetSysctl("/proc/sys/net/ipv4/ip_forward", on ? "1" : "0"));
    return WriteNetSysctl("/proc/sys/net/ipv6/conf/all/forwarding", on ? "1" : "0");
  });
}

std::vector<DnsQuerySeen> FakeInternet::DnsQueries() const {
  std::lock_guard<std::mutex> lock(observations_->mu);
  return observations_->dns;
}

std::vector<std::string> FakeInternet::NamesQueriedAt(std::string_view server) const {
  std::vector<std::string> names;
  std::lock_guard<std::mutex> lock(observations_->mu);
  for (const DnsQuerySeen& q : observations_->dns) {
    if (q.server == server) names.push_back(q.name);
  }
  return names;
}

std::vector<HttpRequestSeen> FakeInternet::HttpRequests() const {
  std::lock_guard<std::mutex> lock(observations_->mu);
  return observations_->http;
}

std::vector<HttpRequestSeen> FakeInternet::HttpRequestsTo(std::string_view server) const {
  std::vector<HttpRequestSeen> out;
  std::lock_guard<std::mutex> lock(observations_->mu);
  for (const HttpRequestSeen& r : observations_->http) {
    if (r.server == server) out.push_back(r);
  }
  return out;
}

std::vector<ContactSeen> FakeInternet::Contacts() const {
  std::lock_guard<std::mutex> lock(observations_->mu);
  return observations_->contacts;
}

int FakeInternet::ContactsAt(std::string_view server, int port) const {
  std::lock_guard<std::mutex> lock(observations_->mu);
  return static_cast<int>(
      std::count_if(observations_->contacts.begin(), observations_->contacts.end(),
                    [&](const ContactSeen& c) { return c.server == server && c.port == port; }));
}

void FakeInternet::ClearObservations() {
  std::lock_guard<std::mutex> lock(observations_->mu);
  observations_->dns.clear();
  observations_->http.clear();
  observations_->contacts.clear();
}

}  // namespace codespace::lanes
