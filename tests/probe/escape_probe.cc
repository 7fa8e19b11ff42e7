// escape_probe: run inside a sandbox by the lane tests. Each "wall" action tries one forbidden
// thing and exits 0 when the wall held, or its own distinct code when the forbidden action
// WORKED — so a red lane says exactly which wall fell. "reach" actions report plain facts
// (0 = yes, 1 = no) for checks where success is expected.
//
//   escape_probe caps                   10: some capability set is not empty
//   escape_probe write PATH             11: creating PATH worked
//   escape_probe env-absent NAME        12: NAME is in the environment
//   escape_probe signal PID             13: kill(PID, 0) worked (a process outside is visible)
//   escape_probe see MARKER             14: some /proc/*/cmdline contains MARKER
//   escape_probe no-connect HOST PORT   15: a TCP connection to HOST:PORT was made
//   escape_probe connect HOST PORT      0 connected, 1 not
//   escape_probe links                  prints the network interfaces, one a line
//   escape_probe gateway                prints the IPv4 default gateway
//   escape_probe listen PORT SECONDS    a TCP listener on 127.0.0.1:PORT for the lanes that
//                                       build their own network namespace (exits after SECONDS)
//
// For the file-system view (docs/view.md). Nothing is ever written: writability is tested by
// open(O_WRONLY) without O_CREAT or O_TRUNC, which changes nothing (a sysctl is set by write(2),
// never by open).
//   escape_probe no-write-open PATH     21: open(PATH, O_WRONLY) worked
//   escape_probe absent PATH            22: PATH exists (lstat)
//   escape_probe no-read PATH           23: reading PATH gave bytes
//   escape_probe no-mkdir PATH          26: mkdir(PATH) worked (removed again at once)
//   escape_probe no-unix-connect PATH   24: a connection to the unix socket PATH was made
//   escape_probe no-abstract-connect N  25: a connection to the abstract unix socket N was made
//   escape_probe unix-connect PATH      0 connected, 1 not (abstract-connect N the same)
//   escape_probe whoami                 prints uid, gid, getpwuid's name and home, and $HOME
//
// For the filtered-egress tests (ADDR is IPv4 or IPv6 wherever it is taken):
//   escape_probe connect-name NAME PORT getaddrinfo, then TCP connect (3 s each address):
//                                       0 connected, 3 not resolved, 1 no address connected
//   escape_probe http-get ADDR PORT     GET /: prints the status line and the first body line;
//                                       0 on a 200, 1 otherwise
//   escape_probe udp-echo ADDR PORT     0 when the datagram came back within 2 s, 1 otherwise
//   escape_probe resolve NAME           prints the addresses; 0 resolved, 1 not
//   escape_probe no-resolve NAME        20: NAME resolved
//   escape_probe dns-direct SERVER NAME 19: a raw A query to SERVER:53 got answer records back
//   escape_probe ping ADDR              16: an ICMP echo reply came back (ping socket, else raw)
//   escape_probe raw-socket             17: a raw ICMP or packet socket could be created
// For the identity walls (docs/identity.md; no-unix-connect above serves them too):
//   escape_probe read PATH              30: opening PATH for reading worked
//   escape_probe sysctl-write           31: /proc/sys/kernel/domainname opened for writing (closed
//                                       at once: nothing is written)
//   escape_probe parent-fd FD           32: the parent's /proc/PPID/fd/FD opened for writing (the
//                                       parent is codespace-init, FD its status channel)
//   escape_probe ptrace-parent          33: PTRACE_ATTACH to the parent worked (detached at once)
//   escape_probe key-absent DESC        34: a "user" key DESC is in the session keyring
//   escape_probe setuid PATH            27: chmod(PATH, 04755) left PATH setuid
//   escape_probe nosuid PATH            28: the mount PATH is on lacks nosuid (mountinfo)
//   escape_probe fd-absent FD           29: descriptor FD is open in this process (inherited)
//   escape_probe netadmin               18: adding an address (rtnetlink), a route (rtnetlink) or
//                                       an nftables table (nft on PATH) worked; what worked is
//                                       undone at once. Run it only inside a sandbox or a test
//                                       namespace.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <linux/keyctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

int Caps() {
  std::ifstream in("/proc/self/status");
  std::string line;
  int bad = 0;
  while (std::getline(in, line)) {
    for (const char* set : {"CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}) {
      if (line.rfind(set, 0) == 0) {
        unsigned long long v = std::strtoull(line.c_str() + std::strlen(set), nullptr, 16);
        if (v != 0) {
          std::printf("%s\n", line.c_str());
          bad = 10;
        }
      }
    }
  }
  return bad;
}

int Write(const char* path) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::printf("write %s: %s\n", path, std::strerror(errno));
    return 0;
  }
  ::close(fd);
  ::unlink(path);
  std::printf("write %s: created\n", path);
  return 11;
}

int EnvAbsent(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return 0;
  std::printf("%s=%s\n", name, v);
  return 12;
}

int Signal(const char* pid) {
  if (::kill(std::atoi(pid), 0) == 0) {
    std::printf("kill(%s, 0): delivered\n", pid);
    return 13;
  }
  std::printf("kill(%s, 0): %s\n", pid, std::strerror(errno));
  return 0;
}

int See(const char* marker) {
  DIR* d = ::opendir("/proc");
  if (!d) return 0;
  int found = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string cmd = ss.str();
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(marker) != std::string::npos && cmd.find("escape_probe") == std::string::npos) {
      std::printf("visible: pid %s: %s\n", e->d_name, cmd.c_str());
      found = 14;
    }
  }
  ::closedir(d);
  return found;
}

bool Connect(const char* host, const char* port) {
  sockaddr_storage ss{};
  socklen_t len;
  int family;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    family = AF_INET;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
    len = sizeof(*v4);
  } else if (::inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(std::atoi(port)));
    len = sizeof(*v6);
  } else {
    std::printf("connect %s:%s: not an address\n", host, port);
    return false;
  }
  int s = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  int rc = ::connect(s, reinterpret_cast<sockaddr*>(&ss), len);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{s, POLLOUT, 0};
    rc = ::poll(&p, 1, 3000) == 1 ? 0 : -1;
    int err = 0;
    socklen_t elen = sizeof(err);
    if (rc == 0 && (::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0)) {
      errno = err;
      rc = -1;
    } else if (rc != 0) {
      errno = ETIMEDOUT;
    }
  }
  std::printf("connect %s:%s: %s\n", host, port, rc == 0 ? "connected" : std::strerror(errno));
  ::close(s);
  return rc == 0;
}

// /proc/self/net/dev is per network namespace (unlike a /sys bound from the host).
int Links() {
  std::ifstream in("/proc/self/net/dev");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (++n <= 2) continue;  // two header lines
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    std::printf("%s\n", name.c_str());
  }
  return n > 0 ? 0 : 1;
}

int Listen(const char* port, const char* seconds) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(s, 64) != 0) {
    std::perror("listen");
    return 1;
  }
  ::alarm(static_cast<unsigned>(std::atoi(seconds)));  // bounded: never outlives its lane
  for (;;) {
    int c = ::accept4(s, nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) ::close(c);
  }
}

// ---- Filtered-egress actions -------------------------------------------------------------------

// ADDR (IPv4 or IPv6) and PORT into a sockaddr.
bool ParseAddr(const char* host, int port, sockaddr_storage* ss, socklen_t* len) {
  *ss = sockaddr_storage{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(ss);
  if (::inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    *len = sizeof(*v4);
    return true;
  }
  if (::inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    *len = sizeof(*v6);
    return true;
  }
  std::printf("%s: not an IP address\n", host);
  return false;
}

std::string AddrText(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

long long NowMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

// Waits for `events` on `fd` until `deadline_ms` (CLOCK_MONOTONIC); true when ready.
bool WaitFor(int fd, short events, long long deadline_ms) {
  for (;;) {
    long long left = deadline_ms - NowMs();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

// A TCP connection with a timeout: the socket, or -1 with errno set.
int ConnectWithin(const sockaddr* sa, socklen_t len, int timeout_ms) {
  int s = ::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  if (::connect(s, sa, len) == 0) return s;
  if (errno != EINPROGRESS) {
    int e = errno;
    ::close(s);
    errno = e;
    return -1;
  }
  if (!WaitFor(s, POLLOUT, NowMs() + timeout_ms)) {
    ::close(s);
    errno = ETIMEDOUT;
    return -1;
  }
  int err = 0;
  socklen_t elen = sizeof(err);
  if (::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
    ::close(s);
    errno = err != 0 ? err : EIO;
    return -1;
  }
  return s;
}

int ConnectName(const char* name, const char* port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(name, port, &hints, &res);
  if (rc != 0) {
    std::printf("resolve %s: %s\n", name, ::gai_strerror(rc));
    return 3;
  }
  int result = 1;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int s = ConnectWithin(ai->ai_addr, ai->ai_addrlen, 3000);
    std::string addr = AddrText(ai->ai_addr);
    std::printf("connect %s (%s) port %s: %s\n", name, addr.c_str(), port,
                s >= 0 ? "connected" : std::strerror(errno));
    if (s >= 0) {
      ::close(s);
      result = 0;
      break;
    }
  }
  ::freeaddrinfo(res);
  return result;
}

int HttpGet(const char* host, const char* port) {
  sockaddr_storage ss;
  socklen_t len;
  if (!ParseAddr(host, std::atoi(port), &ss, &len)) return 1;
  int s = ConnectWithin(reinterpret_cast<sockaddr*>(&ss), len, 3000);
  if (s < 0) {
    std::printf("http-get %s port %s: connect: %s\n", host, port, std::strerror(errno));
    return 1;
  }
  std::string req =
      std::string("GET / HTTP/1.0\r\nHost: ") + host + "\r\nUser-Agent: escape_probe\r\n\r\n";
  if (::send(s, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    std::printf("http-get %s port %s: send: %s\n", host, port, std::strerror(errno));
    ::close(s);
    return 1;
  }
  std::string resp;
  long long deadline = NowMs() + 3000;
  char buf[4096];
  while (WaitFor(s, POLLIN, deadline)) {
    ssize_t n = ::recv(s, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(s);
  std::string status = resp.substr(0, resp.find('\n'));
  if (!status.empty() && status.back() == '\r') status.pop_back();
  size_t body = resp.find("\r\n\r\n");
  std::string first;
  if (body != std::string::npos) {
    first = resp.substr(body + 4);
    first = first.substr(0, first.find('\n'));
  }
  std::printf("http-get %s port %s: %s\n", host, port,
              status.empty() ? "(no response)" : status.c_str());
  std::printf("%s\n", first.c_str());
  bool ok =
      status.rfind("HTTP/1.", 0) == 0 && status.size() >= 12 && status.compare(9, 3, "200") == 0;
  return ok ? 0 : 1;
}

int UdpEcho(const char* host, const char* port) {
  sockaddr_storage ss;
  socklen_t len;
  if (!ParseAddr(host, std::atoi(port), &ss, &len)) return 1;
  int s = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    std::printf("udp-echo %s port %s: %s\n", host, port, std::strerror(errno));
    if (s >= 0) ::close(s);
    return 1;
  }
  std::string msg = "escape-probe " + std::to_string(::getpid());
  if (::send(s, msg.data(), msg.size(), 0) < 0) {
    std::printf("udp-echo %s port %s: send: %s\n", host, port, std::strerror(errno));
    ::close(s);
    return 1;
  }
  long long deadline = NowMs() + 2000;
  char buf[512];
  while (WaitFor(s, POLLIN, deadline)) {
    ssize_t n = ::recv(s, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      std::printf("udp-echo %s port %s: recv: %s\n", host, port, std::strerror(errno));
      ::close(s);
      return 1;
    }
    if (std::string(buf, static_cast<size_t>(n)) == msg) {
      std::printf("udp-echo %s port %s: echoed\n", host, port);
      ::close(s);
      return 0;
    }
  }
  std::printf("udp-echo %s port %s: no echo within 2 s\n", host, port);
  ::close(s);
  return 1;
}

bool Resolve(const char* name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(name, nullptr, &hints, &res);
  if (rc != 0) {
    std::printf("resolve %s: %s\n", name, ::gai_strerror(rc));
    return false;
  }
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    std::printf("resolve %s: %s\n", name, AddrText(ai->ai_addr).c_str());
  }
  ::freeaddrinfo(res);
  return true;
}

// DNS wire helpers for dns-direct: skips a (possibly compressed) name; false when malformed.
bool SkipDnsName(const std::string& m, size_t* at) {
  while (*at < m.size()) {
    auto len = static_cast<uint8_t>(m[*at]);
    if (len == 0) {
      *at += 1;
      return true;
    }
    if ((len & 0xc0) == 0xc0) {
      *at += 2;
      return *at <= m.size();
    }
    *at += 1 + len;
  }
  return false;
}

unsigned U16(const std::string& m, size_t at) {
  return (static_cast<uint8_t>(m[at]) << 8) | static_cast<uint8_t>(m[at + 1]);
}

int DnsDirect(const char* server, const char* name) {
  sockaddr_storage ss;
  socklen_t len;
  if (!ParseAddr(server, 53, &ss, &len)) return 0;
  const unsigned id = static_cast<unsigned>(::getpid()) & 0xffff;
  std::string q = {static_cast<char>(id >> 8),
                   static_cast<char>(id & 0xff),
                   0x01,
                   0x00,  // RD
                   0,
                   1,
                   0,
                   0,
                   0,
                   0,
                   0,
                   0};
  for (std::string n = name; !n.empty();) {
    size_t dot = n.find('.');
    std::string label = n.substr(0, dot);
    q.push_back(static_cast<char>(label.size()));
    q += label;
    n = dot == std::string::npos ? "" : n.substr(dot + 1);
  }
  q += std::string("\0\0\x01\0\x01", 5);  // root, QTYPE A, QCLASS IN
  int s = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::send(s, q.data(), q.size(), 0) < 0) {
    std::printf("dns-direct %s %s: %s\n", server, name, std::strerror(errno));
    if (s >= 0) ::close(s);
    return 0;
  }
  long long deadline = NowMs() + 2000;
  char buf[2048];
  std::string m;
  while (WaitFor(s, POLLIN, deadline)) {
    ssize_t n = ::recv(s, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      std::printf("dns-direct %s %s: recv: %s\n", server, name, std::strerror(errno));
      ::close(s);
      return 0;
    }
    if (n >= 12 && U16(std::string(buf, 2), 0) == id) {
      m.assign(buf, static_cast<size_t>(n));
      break;
    }
  }
  ::close(s);
  if (m.empty()) {
    std::printf("dns-direct %s %s: no response\n", server, name);
    return 0;
  }
  unsigned rcode = U16(m, 2) & 0xf;
  unsigned qd = U16(m, 4), an = U16(m, 6);
  std::printf("dns-direct %s %s: rcode %u, %u answer(s)\n", server, name, rcode, an);
  size_t at = 12;
  for (unsigned i = 0; i < qd; ++i) {
    if (!SkipDnsName(m, &at)) return an > 0 ? 19 : 0;
    at += 4;
  }
  for (unsigned i = 0; i < an; ++i) {
    if (!SkipDnsName(m, &at) || at + 10 > m.size()) break;
    unsigned type = U16(m, at);
    unsigned long ttl = (static_cast<unsigned long>(U16(m, at + 4)) << 16) | U16(m, at + 6);
    unsigned rdlen = U16(m, at + 8);
    at += 10;
    if (at + rdlen > m.size()) break;
    char text[INET6_ADDRSTRLEN] = "";
    if (type == 1 && rdlen == 4) {
      ::inet_ntop(AF_INET, m.data() + at, text, sizeof(text));
      std::printf("answer A %s ttl %lu\n", text, ttl);
    } else if (type == 28 && rdlen == 16) {
      ::inet_ntop(AF_INET6, m.data() + at, text, sizeof(text));
      std::printf("answer AAAA %s ttl %lu\n", text, ttl);
    } else {
      std::printf("answer type %u ttl %lu\n", type, ttl);
    }
    at += rdlen;
  }
  return an > 0 ? 19 : 0;
}

uint16_t IcmpChecksum(const unsigned char* p, size_t n) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>((p[i] << 8) | p[i + 1]);
  if (n & 1) sum += static_cast<uint32_t>(p[n - 1] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

int Ping(const char* host) {
  sockaddr_storage ss;
  socklen_t len;
  if (!ParseAddr(host, 0, &ss, &len)) return 0;
  const bool v6 = ss.ss_family == AF_INET6;
  const int proto = v6 ? static_cast<int>(IPPROTO_ICMPV6) : static_cast<int>(IPPROTO_ICMP);
  bool raw = false;
  int s = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, proto);
  std::printf("ping: dgram icmp socket: %s\n", s >= 0 ? "created" : std::strerror(errno));
  if (s < 0) {
    s = ::socket(ss.ss_family, SOCK_RAW | SOCK_CLOEXEC, proto);
    std::printf("ping: raw icmp socket: %s\n", s >= 0 ? "created" : std::strerror(errno));
    if (s < 0) {
      std::printf("ping %s: no ICMP socket\n", host);
      return 0;
    }
    raw = true;
  }
  const uint16_t ident = static_cast<uint16_t>(::getpid() & 0xffff);
  unsigned char pkt[24] = {0};
  pkt[0] = v6 ? 128 : 8;  // echo request
  pkt[4] = static_cast<unsigned char>(ident >> 8);
  pkt[5] = static_cast<unsigned char>(ident & 0xff);
  pkt[7] = 1;  // sequence
  std::memcpy(pkt + 8, "escape-probe-ping", 16);
  if (!v6) {
    uint16_t sum = IcmpChecksum(pkt, sizeof(pkt));
    pkt[2] = static_cast<unsigned char>(sum >> 8);
    pkt[3] = static_cast<unsigned char>(sum & 0xff);
  }  // ICMPv6: the kernel computes the checksum (it covers the pseudo-header)
  if (::sendto(s, pkt, sizeof(pkt), 0, reinterpret_cast<sockaddr*>(&ss), len) < 0) {
    std::printf("ping %s: sendto: %s\n", host, std::strerror(errno));
    ::close(s);
    return 0;
  }
  long long deadline = NowMs() + 2000;
  unsigned char buf[2048];
  while (WaitFor(s, POLLIN, deadline)) {
    sockaddr_storage from{};
    socklen_t flen = sizeof(from);
    ssize_t n =
        ::recvfrom(s, buf, sizeof(buf), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &flen);
    if (n <= 0) continue;
    size_t off = 0;
    if (raw && !v6) off = static_cast<size_t>(buf[0] & 0x0f) * 4;  // raw IPv4 includes the header
    if (static_cast<size_t>(n) < off + 8) continue;
    const unsigned char* icmp = buf + off;
    const unsigned char reply = v6 ? 129 : 0;
    if (icmp[0] != reply ||
        AddrText(reinterpret_cast<sockaddr*>(&from)) != AddrText(reinterpret_cast<sockaddr*>(&ss)))
      continue;
    // A ping socket rewrites the identifier itself; a raw socket sees every reply on the host.
    if (raw && ((icmp[4] << 8) | icmp[5]) != ident) continue;
    std::printf("ping %s: echo reply (%s socket)\n", host, raw ? "raw" : "dgram");
    ::close(s);
    return 16;
  }
  std::printf("ping %s: no reply within 2 s\n", host);
  ::close(s);
  return 0;
}

int RawSocket() {
  int result = 0;
  int s = ::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
  std::printf("socket(AF_INET, SOCK_RAW, IPPROTO_ICMP): %s\n",
              s >= 0 ? "created" : std::strerror(errno));
  if (s >= 0) {
    ::close(s);
    result = 17;
  }
  s = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
  std::printf("socket(AF_PACKET, SOCK_RAW, 0): %s\n", s >= 0 ? "created" : std::strerror(errno));
  if (s >= 0) {
    ::close(s);
    result = 17;
  }
  return result;
}

// One rtnetlink request, hand-built: `type`/`flags` with `body` (the fixed header and its
// attributes). Returns 0 when the kernel acknowledged it, else the errno it gave.
int RtnetlinkRequest(uint16_t type, uint16_t flags, const std::string& body) {
  int s = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (s < 0) return errno;
  std::string msg(NLMSG_HDRLEN, '\0');
  auto* nh = reinterpret_cast<nlmsghdr*>(msg.data());
  nh->nlmsg_len = static_cast<uint32_t>(NLMSG_HDRLEN + body.size());
  nh->nlmsg_type = type;
  nh->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
  nh->nlmsg_seq = 1;
  msg += body;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(s, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) <
      0) {
    int e = errno;
    ::close(s);
    return e;
  }
  alignas(nlmsghdr) char buf[8192];
  int result = ETIMEDOUT;
  if (WaitFor(s, POLLIN, NowMs() + 2000)) {
    ssize_t n = ::recv(s, buf, sizeof(buf), 0);
    if (n < 0) {
      result = errno;
    } else {
      auto* h = reinterpret_cast<nlmsghdr*>(buf);
      if (NLMSG_OK(h, static_cast<unsigned>(n)) && h->nlmsg_type == NLMSG_ERROR) {
        result = -reinterpret_cast<nlmsgerr*>(buf + NLMSG_ALIGN(sizeof(nlmsghdr)))->error;
      } else {
        result = EPROTO;
      }
    }
  }
  ::close(s);
  return result;
}

void AppendAttr(std::string& body, uint16_t type, const void* data, size_t len) {
  rtattr rta{};
  rta.rta_len = static_cast<unsigned short>(RTA_LENGTH(len));
  rta.rta_type = type;
  body.append(reinterpret_cast<const char*>(&rta), sizeof(rta));
  body.append(static_cast<const char*>(data), len);
  body.append(RTA_ALIGN(len) - len, '\0');
}

std::string AddrBody() {
  ifaddrmsg ifa{};
  ifa.ifa_family = AF_INET;
  ifa.ifa_prefixlen = 32;
  ifa.ifa_scope = RT_SCOPE_HOST;
  unsigned lo = ::if_nametoindex("lo");
  ifa.ifa_index = lo != 0 ? lo : 1;
  std::string body(reinterpret_cast<const char*>(&ifa), sizeof(ifa));
  in_addr a{};
  ::inet_pton(AF_INET, "10.99.99.1", &a);
  AppendAttr(body, IFA_LOCAL, &a, sizeof(a));
  AppendAttr(body, IFA_ADDRESS, &a, sizeof(a));
  return body;
}

std::string RouteBody() {
  rtmsg rt{};
  rt.rtm_family = AF_INET;
  rt.rtm_dst_len = 24;
  rt.rtm_table = RT_TABLE_MAIN;
  rt.rtm_protocol = RTPROT_STATIC;
  rt.rtm_scope = RT_SCOPE_UNIVERSE;
  rt.rtm_type = RTN_BLACKHOLE;
  std::string body(reinterpret_cast<const char*>(&rt), sizeof(rt));
  in_addr a{};
  ::inet_pton(AF_INET, "10.99.98.0", &a);
  AppendAttr(body, RTA_DST, &a, sizeof(a));
  return body;
}

// Runs `argv` (argv[0] a path) with the probe's stdout/stderr; its exit code, or -1.
int RunProgram(const std::vector<std::string>& args) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::vector<char*> av;
    for (const std::string& a : args) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    ::execv(av[0], av.data());
    std::printf("exec %s: %s\n", av[0], std::strerror(errno));
    ::_exit(127);
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string FindOnPath(const char* name) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::stringstream ss(p);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string f = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (::stat(f.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(f.c_str(), X_OK) == 0)
      return f;
  }
  return "";
}

int NetAdmin() {
  int result = 0;
  int err = RtnetlinkRequest(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, AddrBody());
  std::printf("rtnetlink RTM_NEWADDR 10.99.99.1/32 dev lo: %s\n",
              err == 0 ? "added" : std::strerror(err));
  if (err == 0) {
    result = 18;
    int undo = RtnetlinkRequest(RTM_DELADDR, 0, AddrBody());
    std::printf("  undo RTM_DELADDR: %s\n", undo == 0 ? "removed" : std::strerror(undo));
  }
  err = RtnetlinkRequest(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, RouteBody());
  std::printf("rtnetlink RTM_NEWROUTE blackhole 10.99.98.0/24: %s\n",
              err == 0 ? "added" : std::strerror(err));
  if (err == 0) {
    result = 18;
    int undo = RtnetlinkRequest(RTM_DELROUTE, 0, RouteBody());
    std::printf("  undo RTM_DELROUTE: %s\n", undo == 0 ? "removed" : std::strerror(undo));
  }
  std::string nft = FindOnPath("nft");
  if (nft.empty()) {
    std::printf("nft add table inet escape_probe_test: nft not found on PATH\n");
  } else {
    int rc = RunProgram({nft, "add", "table", "inet", "escape_probe_test"});
    std::printf("%s add table inet escape_probe_test: %s (exit %d)\n", nft.c_str(),
                rc == 0 ? "added" : "failed", rc);
    if (rc == 0) {
      result = 18;
      int undo = RunProgram({nft, "delete", "table", "inet", "escape_probe_test"});
      std::printf("  undo nft delete table: exit %d\n", undo);
    }
  }
  return result;
}

// Prints the IPv4 default gateway (from /proc/net/route) — the worker side of a filtered run's
// veth — so a lane can aim at the worker's own address on that link.
int Gateway() {
  std::ifstream in("/proc/net/route");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string iface, dest, gw;
    f >> iface >> dest >> gw;
    if (dest == "00000000") {
      unsigned long v = std::strtoul(gw.c_str(), nullptr, 16);
      std::printf("%lu.%lu.%lu.%lu\n", v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff);
      return 0;
    }
  }
  return 1;
}

// ---- File-system view actions -----------------------------------------------------------------

int NoWriteOpen(const char* path) {
  int fd = ::open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    std::printf("open(%s, O_WRONLY): %s\n", path, std::strerror(errno));
    return 0;
  }
  ::close(fd);  // nothing written
  std::printf("open(%s, O_WRONLY): opened\n", path);
  return 21;
}

int Absent(const char* path) {
  struct stat st {};
  if (::lstat(path, &st) != 0) {
    std::printf("lstat(%s): %s\n", path, std::strerror(errno));
    return 0;
  }
  std::printf("lstat(%s): exists (mode %o)\n", path, st.st_mode);
  return 22;
}

int NoRead(const char* path) {
  int fd = ::open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    std::printf("open(%s, O_RDONLY): %s\n", path, std::strerror(errno));
    return 0;
  }
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  int e = errno;
  ::close(fd);
  if (n > 0) {
    std::printf("read(%s): %zd bytes\n", path, n);
    return 23;
  }
  std::printf("read(%s): %s\n", path, n == 0 ? "nothing (EOF)" : std::strerror(e));
  return 0;
}

int NoMkdir(const char* path) {
  if (::mkdir(path, 0700) != 0) {
    std::printf("mkdir(%s): %s\n", path, std::strerror(errno));
    return 0;
  }
  ::rmdir(path);
  std::printf("mkdir(%s): created (removed again)\n", path);
  return 26;
}

// Connects to a unix stream socket at `name` (a path, or with `abstract` an abstract name).
bool UnixConnect(const char* name, bool abstract) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  size_t n = std::strlen(name);
  if (n + 2 > sizeof(a.sun_path)) return false;
  std::memcpy(a.sun_path + (abstract ? 1 : 0), name, n);
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n + (abstract ? 1 : 0));
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  int rc = ::connect(s, reinterpret_cast<sockaddr*>(&a), len);
  std::printf("connect(unix %s%s): %s\n", abstract ? "@" : "", name,
              rc == 0 ? "connected" : std::strerror(errno));
  ::close(s);
  return rc == 0;
}

int WhoAmI() {
  const passwd* pw = ::getpwuid(::getuid());
  const char* home = std::getenv("HOME");
  std::printf("uid=%u gid=%u name=%s pwhome=%s HOME=%s\n", ::getuid(), ::getgid(),
              pw ? pw->pw_name : "?", pw ? pw->pw_dir : "?", home ? home : "-");
  return pw ? 0 : 1;
}

// ---- Identity walls ---------------------------------------------------------------------------

int ReadOpen(const char* path) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::printf("open(%s, O_RDONLY): %s\n", path, std::strerror(errno));
    return 0;
  }
  ::close(fd);
  std::printf("open(%s, O_RDONLY): opened\n", path);
  return 30;
}

int SysctlWrite() {
  const char* path = "/proc/sys/kernel/domainname";
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    std::printf("open(%s, O_WRONLY): %s\n", path, std::strerror(errno));
    return 0;
  }
  ::close(fd);  // nothing written: the host's value stays
  std::printf("open(%s, O_WRONLY): opened\n", path);
  return 31;
}

int ParentFd(const char* fd) {
  std::string path = "/proc/" + std::to_string(::getppid()) + "/fd/" + fd;
  int f = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (f < 0) {
    std::printf("open(%s, O_WRONLY): %s\n", path.c_str(), std::strerror(errno));
    return 0;
  }
  ::close(f);  // nothing written
  std::printf("open(%s, O_WRONLY): opened\n", path.c_str());
  return 32;
}

int PtraceParent() {
  pid_t parent = ::getppid();
  if (::ptrace(PTRACE_ATTACH, parent, nullptr, nullptr) != 0) {
    std::printf("ptrace(PTRACE_ATTACH, %d): %s\n", parent, std::strerror(errno));
    return 0;
  }
  ::waitpid(parent, nullptr, __WALL);
  ::ptrace(PTRACE_DETACH, parent, nullptr, nullptr);
  std::printf("ptrace(PTRACE_ATTACH, %d): attached (detached again)\n", parent);
  return 33;
}

int KeyAbsent(const char* desc) {
  long session = ::syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
  long key = ::syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user", desc, 0);
  std::printf("session keyring %ld; key \"%s\": %s\n", session, desc,
              key >= 0 ? "found" : std::strerror(errno));
  return key >= 0 ? 34 : 0;
}

int Setuid(const char* path) {
  int rc = ::chmod(path, 04755);
  std::printf("chmod(%s, 04755): %s\n", path, rc == 0 ? "done" : std::strerror(errno));
  struct stat st {};
  if (::stat(path, &st) == 0 && (st.st_mode & S_ISUID)) return 27;
  return 0;
}

// The mount PATH is on: the mountinfo line whose mount point is PATH's longest prefix.
int Nosuid(const char* path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line, best_point, best_opts;
  const std::string p = path;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point, opts;
    f >> id >> parent >> dev >> root >> point >> opts;
    bool prefix = p == point || point == "/" ||
                  (p.rfind(point, 0) == 0 && p.size() > point.size() && p[point.size()] == '/');
    if (prefix && point.size() >= best_point.size()) {
      best_point = point;
      best_opts = opts;
    }
  }
  std::printf("%s is on the mount at %s (%s)\n", path, best_point.c_str(), best_opts.c_str());
  return ("," + best_opts + ",").find(",nosuid,") == std::string::npos ? 28 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  std::string a = argc > 1 ? argv[1] : "";
  if (a == "caps") return Caps();
  if (a == "write" && argc == 3) return Write(argv[2]);
  if (a == "env-absent" && argc == 3) return EnvAbsent(argv[2]);
  if (a == "signal" && argc == 3) return Signal(argv[2]);
  if (a == "see" && argc == 3) return See(argv[2]);
  if (a == "no-connect" && argc == 4) return Connect(argv[2], argv[3]) ? 15 : 0;
  if (a == "connect" && argc == 4) return Connect(argv[2], argv[3]) ? 0 : 1;
  if (a == "links") return Links();
  if (a == "listen" && argc == 4) return Listen(argv[2], argv[3]);
  if (a == "connect-name" && argc == 4) return ConnectName(argv[2], argv[3]);
  if (a == "http-get" && argc == 4) return HttpGet(argv[2], argv[3]);
  if (a == "udp-echo" && argc == 4) return UdpEcho(argv[2], argv[3]);
  if (a == "resolve" && argc == 3) return Resolve(argv[2]) ? 0 : 1;
  if (a == "no-resolve" && argc == 3) return Resolve(argv[2]) ? 20 : 0;
  if (a == "dns-direct" && argc == 4) return DnsDirect(argv[2], argv[3]);
  if (a == "ping" && argc == 3) return Ping(argv[2]);
  if (a == "raw-socket") return RawSocket();
  if (a == "netadmin") return NetAdmin();
  if (a == "gateway") return Gateway();
  if (a == "no-write-open" && argc == 3) return NoWriteOpen(argv[2]);
  if (a == "absent" && argc == 3) return Absent(argv[2]);
  if (a == "no-read" && argc == 3) return NoRead(argv[2]);
  if (a == "no-mkdir" && argc == 3) return NoMkdir(argv[2]);
  if (a == "no-unix-connect" && argc == 3) return UnixConnect(argv[2], false) ? 24 : 0;
  if (a == "no-abstract-connect" && argc == 3) return UnixConnect(argv[2], true) ? 25 : 0;
  if (a == "unix-connect" && argc == 3) return UnixConnect(argv[2], false) ? 0 : 1;
  if (a == "abstract-connect" && argc == 3) return UnixConnect(argv[2], true) ? 0 : 1;
  if (a == "whoami") return WhoAmI();
  if (a == "read" && argc == 3) return ReadOpen(argv[2]);
  if (a == "sysctl-write") return SysctlWrite();
  if (a == "parent-fd" && argc == 3) return ParentFd(argv[2]);
  if (a == "ptrace-parent") return PtraceParent();
  if (a == "key-absent" && argc == 3) return KeyAbsent(argv[2]);
  if (a == "setuid" && argc == 3) return Setuid(argv[2]);
  if (a == "nosuid" && argc == 3) return Nosuid(argv[2]);
  if (a == "fd-absent" && argc == 3) {
    bool open = ::fcntl(std::atoi(argv[2]), F_GETFD) >= 0;
    std::printf("fd %s: %s\n", argv[2], open ? "open" : "closed");
    return open ? 29 : 0;
  }
  std::fprintf(stderr, "escape_probe: unknown action\n");
  return 2;
}
