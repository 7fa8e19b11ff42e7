// relay_bench: the broker relay against a socat bridge of the same shape (`make bench` item 3;
// bench/run_bench.py drives it).
//
//   relay:  client ─TCP─> [in-sandbox relay 127.0.0.1:P] ─unix─> [BrokerBridge] ─TCP─> broker
//   socat:  client ─TCP─> [socat TCP-LISTEN → UNIX-CONNECT] ─unix─> [socat UNIX-LISTEN → TCP] ─TCP─> broker
//
// Modes:
//   relay_bench broker --port-file F
//       The broker: listens on 127.0.0.1 (a free port, written to F) until killed. A connection
//       that starts with 'S' and an 8-byte little-endian count is a sink: once that many more
//       bytes have arrived it answers one byte, 'A'. One that starts with 'E' is echoed.
//   relay_bench client (--port P | --url-env NAME) [--bytes N] [--reps R] [--ttfb-reps M]
//       Measures through whatever listens at P (or at the port of the URL in $NAME, e.g.
//       CODESPACE_BROKER_URL inside a `codespace run --broker` sandbox):
//         throughput  seconds from connect() until the broker's 'A' for N bytes is back;
//         first byte  microseconds from socket() until a 1-byte echo is back (a fresh connection
//                     each time: connection set-up through every hop included).
//       Prints {"throughput_s": [...], "first_byte_us": [...]} on stdout.
//   relay_bench engine --dir D [--bytes N] [--reps R] [--ttfb-reps M] [--socat PATH]
//       The relay engine alone, without codespace around it: a broker thread, the BrokerBridge
//       on a thread (as in a run's supervisor), the in-sandbox relay as a process of its own
//       (this binary re-executed, as codespace-init's child runs it), and a socat bridge of the
//       same shape, measured interleaved (relay, socat, direct, relay, ...). Prints one JSON
//       object: each path's samples.
// Everything listens on loopback only.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/file_util.h"
#include "base/process.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "relay/broker_bridge.h"
#include "relay/relay.h"
#include "relay/sandbox_relay.h"

namespace codespace::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kChunk = 1 << 20;  // client and broker both move 1 MiB per call

struct Options {
  uint64_t bytes = uint64_t{1} << 30;
  int reps = 5;
  int ttfb_reps = 200;
  uint16_t port = 0;
  std::string url_env;
  std::string port_file;
  std::string socat = "socat";
  std::string dir;
};

ssize_t ReadSome(int fd, void* p, size_t n) {
  for (;;) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

Status ReadExactly(int fd, void* p, size_t n) {
  for (size_t got = 0; got < n;) {
    ssize_t r = ReadSome(fd, static_cast<char*>(p) + got, n - got);
    if (r < 0) return ErrnoError("read", errno);
    if (r == 0) return InternalError("read: EOF before the answer");
    got += static_cast<size_t>(r);
  }
  return OkStatus();
}

void NoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// ---------------------------------------------------------------------------------------------
// The broker.

void Serve(UniqueFd fd) {
  NoDelay(fd.get());
  std::vector<char> buf(kChunk);
  char mode = 0;
  if (ReadSome(fd.get(), &mode, 1) != 1) return;
  if (mode == 'S') {
    uint64_t expect = 0;
    if (!ReadExactly(fd.get(), &expect, sizeof(expect)).ok()) return;
    uint64_t seen = 0;
    bool answered = false;
    for (;;) {
      ssize_t n = ReadSome(fd.get(), buf.data(), buf.size());
      if (n <= 0) return;  // EOF (the client is done) or an error: either way, done
      seen += static_cast<uint64_t>(n);
      if (!answered && seen >= expect) {
        answered = true;
        if (!WriteAll(fd.get(), "A", 1).ok()) return;
      }
    }
  }
  if (mode == 'E') {
    if (!WriteAll(fd.get(), "E", 1).ok()) return;
    for (;;) {
      ssize_t n = ReadSome(fd.get(), buf.data(), buf.size());
      if (n <= 0) return;
      if (!WriteAll(fd.get(), buf.data(), static_cast<size_t>(n)).ok()) return;
    }
  }
}

// Accepts until the listener is shut down; a thread per connection.
void AcceptLoop(int listener) {
  for (;;) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    std::thread([fd] { Serve(UniqueFd(fd)); }).detach();
  }
}

Result<UniqueFd> BlockingListener(uint16_t* port) {
  ASSIGN_OR_RETURN(UniqueFd listener, ListenLoopbackTcp("127.0.0.1", 0));
  ASSIGN_OR_RETURN(*port, LocalPort(listener.get()));
  // accept() blocks here: the listener comes back non-blocking from ListenLoopbackTcp.
  int flags = ::fcntl(listener.get(), F_GETFL);
  if (flags < 0 || ::fcntl(listener.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return ErrnoError("fcntl(broker listener, ~O_NONBLOCK)", errno);
  }
  return listener;
}

Status BrokerMain(const Options& o) {
  uint16_t port = 0;
  ASSIGN_OR_RETURN(UniqueFd listener, BlockingListener(&port));
  RETURN_IF_ERROR(WriteFileAtomically(o.port_file, fmt::format("{}\n", port), 0644));
  AcceptLoop(listener.get());
  return InternalError("broker: accept failed");
}

// ---------------------------------------------------------------------------------------------
// The client.

Result<UniqueFd> Connect(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("socket(AF_INET)", errno);
  NoDelay(fd.get());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return ErrnoError(fmt::format("connect(127.0.0.1:{})", port), errno);
  }
  return fd;
}

// Seconds from connect() until the broker says it has every byte.
Result<double> Throughput(uint16_t entry, uint64_t bytes) {
  std::vector<char> buf(kChunk, 'x');
  Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(UniqueFd fd, Connect(entry));
  char header[9] = {'S'};
  std::memcpy(header + 1, &bytes, sizeof(bytes));
  RETURN_IF_ERROR(WriteAll(fd.get(), header, sizeof(header)));
  for (uint64_t sent = 0; sent < bytes;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), bytes - sent));
    RETURN_IF_ERROR(WriteAll(fd.get(), buf.data(), n));
    sent += n;
  }
  char ack = 0;
  RETURN_IF_ERROR(ReadExactly(fd.get(), &ack, 1).WithContext("throughput: the broker's answer"));
  Clock::time_point end = Clock::now();
  fd.reset();
  ::usleep(50000);  // let this connection's teardown finish before the next one starts
  return std::chrono::duration<double>(end - start).count();
}

// Microseconds from socket() until the echoed first byte is back.
Result<double> FirstByte(uint16_t entry) {
  Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(UniqueFd fd, Connect(entry));
  char c = 'E';
  RETURN_IF_ERROR(WriteAll(fd.get(), &c, 1));
  RETURN_IF_ERROR(ReadExactly(fd.get(), &c, 1).WithContext("first byte: the echo"));
  Clock::time_point end = Clock::now();
  return std::chrono::duration<double, std::micro>(end - start).count();
}

std::string JsonList(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{:.6g}", i ? ", " : "", v[i]);
  return s + "]";
}

Status ClientMain(const Options& o) {
  uint16_t port = o.port;
  if (!o.url_env.empty()) {
    // http://127.0.0.1:<port>
    std::string url = GetEnv(o.url_env.c_str());
    while (!url.empty() && url.back() == '/') url.pop_back();
    size_t colon = url.rfind(':');
    if (colon == std::string::npos) {
      return InvalidArgumentError(fmt::format("${}={:?}: no port", o.url_env, url));
    }
    port = static_cast<uint16_t>(std::atoi(url.c_str() + colon + 1));
  }
  if (port == 0) return InvalidArgumentError("client: --port or --url-env is required");
  std::vector<double> seconds, first_byte_us;
  for (int i = 0; i < o.reps; ++i) {
    ASSIGN_OR_RETURN(double t, Throughput(port, o.bytes));
    seconds.push_back(t);
  }
  for (int i = 0; i < o.ttfb_reps; ++i) {
    ASSIGN_OR_RETURN(double t, FirstByte(port));
    first_byte_us.push_back(t);
  }
  fmt::print("{{\"throughput_s\": {}, \"first_byte_us\": {}}}\n", JsonList(seconds),
             JsonList(first_byte_us));
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// The engine alone: both bridges in this process's reach.

// Waits until something accepts on 127.0.0.1:port (socat binds after it starts).
Status WaitListening(uint16_t port) {
  for (int i = 0; i < 500; ++i) {
    if (Connect(port).ok()) return OkStatus();
    ::usleep(10000);
  }
  return UnavailableError(fmt::format("nothing listens on 127.0.0.1:{} after 5 s", port));
}

struct SocatChain {
  ChildProcess to_broker;   // UNIX-LISTEN → TCP broker (the worker side)
  ChildProcess entry_side;  // TCP-LISTEN → UNIX-CONNECT (the sandbox side)
  uint16_t entry = 0;
};

Result<SocatChain> StartSocatChain(const Options& o, uint16_t broker_port) {
  SocatChain c;
  std::string sock = o.dir + "/socat-bridge.sock";
  SpawnOptions a;
  a.argv = {o.socat, fmt::format("UNIX-LISTEN:{},fork,unlink-early", sock),
            fmt::format("TCP:127.0.0.1:{},nodelay", broker_port)};
  a.parent_death_signal = SIGKILL;
  ASSIGN_OR_RETURN(c.to_broker, Spawn(a));
  {
    ASSIGN_OR_RETURN(UniqueFd probe, ListenLoopbackTcp("127.0.0.1", 0));
    ASSIGN_OR_RETURN(c.entry, LocalPort(probe.get()));  // free again once `probe` closes
  }
  SpawnOptions b;
  b.argv = {o.socat, fmt::format("TCP-LISTEN:{},bind=127.0.0.1,reuseaddr,fork,nodelay", c.entry),
            fmt::format("UNIX-CONNECT:{}", sock)};
  b.parent_death_signal = SIGKILL;
  ASSIGN_OR_RETURN(c.entry_side, Spawn(b));
  for (int i = 0; i < 500 && ::access(sock.c_str(), F_OK) != 0; ++i) ::usleep(10000);
  RETURN_IF_ERROR(WaitListening(c.entry));
  return c;
}

Status EngineMain(const Options& o) {
  uint16_t broker_port = 0;
  ASSIGN_OR_RETURN(UniqueFd listener, BlockingListener(&broker_port));
  std::thread broker([fd = listener.get()] { AcceptLoop(fd); });
  broker.detach();  // serves until the process exits

  std::string sock = o.dir + "/codespace-bridge.sock";
  ASSIGN_OR_RETURN(std::unique_ptr<BrokerBridge> bridge,
                   BrokerBridge::Start(sock, BrokerAddress::Tcp("127.0.0.1", broker_port)));
  ASSIGN_OR_RETURN(Pipe ready, MakePipe());
  SpawnOptions s;
  s.argv = {"/proc/self/exe", "--sandbox-relay", sock, "3"};
  s.fds = {{ready.write.get(), 3}};
  s.parent_death_signal = SIGKILL;
  ASSIGN_OR_RETURN(ChildProcess sandbox_relay, Spawn(s));
  ready.write.reset();
  ASSIGN_OR_RETURN(std::string report, ReadAll(ready.read.get()));
  if (report.size() < 2 || report[0] != 'R') {
    return InternalError(fmt::format("in-sandbox relay did not start: {}", report));
  }
  uint16_t relay_entry = static_cast<uint16_t>(std::atoi(report.c_str() + 1));
  ASSIGN_OR_RETURN(SocatChain socat, StartSocatChain(o, broker_port));

  struct Path {
    std::string name;
    uint16_t entry;
    std::vector<double> seconds, first_byte_us;
  };
  std::vector<Path> paths = {
      {"relay", relay_entry, {}, {}}, {"socat", socat.entry, {}, {}}, {"direct", broker_port, {}, {}}};
  // One small warm-up each (page cache, socat's first fork), not counted.
  for (const Path& p : paths) RETURN_IF_ERROR(Throughput(p.entry, 16 << 20).status());
  for (int i = 0; i < o.reps; ++i) {
    for (Path& p : paths) {
      ASSIGN_OR_RETURN(double t, Throughput(p.entry, o.bytes));
      p.seconds.push_back(t);
    }
  }
  for (int i = 0; i < o.ttfb_reps; ++i) {
    for (Path& p : paths) {
      ASSIGN_OR_RETURN(double t, FirstByte(p.entry));
      p.first_byte_us.push_back(t);
    }
  }
  std::string out = fmt::format("{{\"bytes\": {}, \"bridge_bytes_to_broker\": {}", o.bytes,
                                bridge->stats().bytes_to_target);
  for (const Path& p : paths) {
    out += fmt::format(", \"{}\": {{\"throughput_s\": {}, \"first_byte_us\": {}}}", p.name,
                       JsonList(p.seconds), JsonList(p.first_byte_us));
  }
  fmt::print("{}}}\n", out);
  bridge->Stop();
  for (ChildProcess* c : {&sandbox_relay, &socat.to_broker, &socat.entry_side}) {
    c->Signal(SIGKILL).IgnoreError();
    auto reaped = c->Wait();
    (void)reaped;
  }
  return OkStatus();
}

int Usage() {
  std::fprintf(stderr,
               "usage: relay_bench broker --port-file F\n"
               "       relay_bench client (--port P | --url-env NAME) [--bytes N] [--reps R] "
               "[--ttfb-reps M]\n"
               "       relay_bench engine --dir D [--bytes N] [--reps R] [--ttfb-reps M] "
               "[--socat PATH]\n");
  return 2;
}

}  // namespace
}  // namespace codespace::bench

int main(int argc, char** argv) {
  namespace b = codespace::bench;
  // The in-sandbox half of the engine mode, re-executed: relay_bench --sandbox-relay SOCKET FD
  if (argc == 4 && std::string(argv[1]) == "--sandbox-relay") {
    return codespace::RunSandboxRelay(0, argv[2], std::atoi(argv[3]));
  }
  if (argc < 2) return b::Usage();
  ::signal(SIGPIPE, SIG_IGN);
  std::string mode = argv[1];
  b::Options o;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return b::Usage();
    std::string v = argv[++i];
    if (a == "--bytes") o.bytes = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--reps") o.reps = std::atoi(v.c_str());
    else if (a == "--ttfb-reps") o.ttfb_reps = std::atoi(v.c_str());
    else if (a == "--port") o.port = static_cast<uint16_t>(std::atoi(v.c_str()));
    else if (a == "--url-env") o.url_env = v;
    else if (a == "--port-file") o.port_file = v;
    else if (a == "--socat") o.socat = v;
    else if (a == "--dir") o.dir = v;
    else return b::Usage();
  }
  codespace::Status s;
  if (mode == "broker" && !o.port_file.empty()) s = b::BrokerMain(o);
  else if (mode == "client") s = b::ClientMain(o);
  else if (mode == "engine" && !o.dir.empty()) s = b::EngineMain(o);
  else return b::Usage();
  if (!s.ok()) {
    std::fprintf(stderr, "relay_bench %s: %s\n", mode.c_str(), s.message().c_str());
    return 1;
  }
  return 0;
}
