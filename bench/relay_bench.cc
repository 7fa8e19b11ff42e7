// relay_bench: the broker relay against a socat bridge of the same shape, measured in one process
// run (bench/run_bench.py drives it; `make bench` item 3).
//
//   client ──TCP──> [in-sandbox relay, 127.0.0.1:P] ──unix──> [BrokerBridge] ──TCP──> broker
//   client ──TCP──> [socat TCP-LISTEN → UNIX-CONNECT] ──unix──> [socat UNIX-LISTEN → TCP] ──TCP──> broker
//
// The in-sandbox half is RunSandboxRelay in a process of its own (this binary re-executed with
// --sandbox-relay, as codespace-init's child runs it); the BrokerBridge runs on a thread of this
// process, as it does in a run's supervisor. The broker is a thread of this process too: in "sink"
// mode it counts bytes and notes when the last one arrived; in "echo" mode it echoes.
//
// Everything listens on loopback only. Two measurements, interleaved (relay, socat, relay, ...)
// so that drift on a shared machine hits both alike:
//   throughput   seconds from connect() until the broker has received --bytes through the chain;
//   first byte   microseconds from socket() until a 1-byte echo through the chain comes back
//                (a fresh connection each time: connection set-up through both hops included).
// Prints one JSON object on stdout: the raw samples; the driver takes the medians.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
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
  std::string socat = "socat";
  std::string dir;                       // where the unix sockets go
};

// ---------------------------------------------------------------------------------------------
// The broker.

class Broker {
 public:
  static Result<std::unique_ptr<Broker>> Start() {
    ASSIGN_OR_RETURN(UniqueFd listener, ListenLoopbackTcp("127.0.0.1", 0));
    ASSIGN_OR_RETURN(uint16_t port, LocalPort(listener.get()));
    // Accept blocks: the listener comes back non-blocking from ListenLoopbackTcp.
    int flags = ::fcntl(listener.get(), F_GETFL);
    if (flags < 0 || ::fcntl(listener.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
      return ErrnoError("fcntl(broker listener, ~O_NONBLOCK)", errno);
    }
    auto b = std::unique_ptr<Broker>(new Broker(std::move(listener), port));
    b->thread_ = std::thread([p = b.get()] { p->AcceptLoop(); });
    return b;
  }
  ~Broker() {
    stop_.store(true);
    ::shutdown(listener_.get(), SHUT_RDWR);  // wakes accept()
    if (thread_.joinable()) thread_.join();
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return live_ == 0; });
  }

  uint16_t port() const { return port_; }

  // Waits until a sink connection has received all it was told to expect; returns when it did.
  Result<Clock::time_point> WaitSinkDone(std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return sink_done_.has_value(); })) {
      return UnavailableError("broker: the sink did not receive every byte in time");
    }
    Clock::time_point t = *sink_done_;
    sink_done_.reset();
    return t;
  }
  // Waits until no connection is open at the broker (the previous one fully torn down).
  bool WaitIdle(std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return live_ == 0; });
  }

 private:
  Broker(UniqueFd listener, uint16_t port) : listener_(std::move(listener)), port_(port) {}

  void AcceptLoop() {
    while (!stop_.load()) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      {
        std::lock_guard lock(mu_);
        ++live_;
      }
      std::thread([this, fd] { Serve(UniqueFd(fd)); }).detach();
    }
  }

  // First byte: 'S' (then 8 bytes: how many more to expect, little-endian) or 'E'.
  void Serve(UniqueFd fd) {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::vector<char> buf(kChunk);
    char mode = 0;
    if (ReadSome(fd.get(), &mode, 1) == 1) {
      if (mode == 'S') Sink(fd.get(), buf);
      if (mode == 'E') Echo(fd.get(), buf);
    }
    fd.reset();
    std::lock_guard lock(mu_);
    --live_;
    cv_.notify_all();
  }

  void Sink(int fd, std::vector<char>& buf) {
    uint64_t expect = 0;
    size_t got = 0;
    while (got < sizeof(expect)) {
      ssize_t n = ReadSome(fd, reinterpret_cast<char*>(&expect) + got, sizeof(expect) - got);
      if (n <= 0) return;
      got += static_cast<size_t>(n);
    }
    uint64_t seen = 0;
    bool noted = false;
    for (;;) {
      ssize_t n = ReadSome(fd, buf.data(), buf.size());
      if (n <= 0) return;  // EOF (the client closed) or an error: either way, done
      seen += static_cast<uint64_t>(n);
      if (!noted && seen >= expect) {
        noted = true;
        std::lock_guard lock(mu_);
        sink_done_ = Clock::now();
        cv_.notify_all();
      }
    }
  }

  static void Echo(int fd, std::vector<char>& buf) {
    buf[0] = 'E';
    if (!WriteAll(fd, buf.data(), 1).ok()) return;
    for (;;) {
      ssize_t n = ReadSome(fd, buf.data(), buf.size());
      if (n <= 0) return;
      if (!WriteAll(fd, buf.data(), static_cast<size_t>(n)).ok()) return;
    }
  }

  static ssize_t ReadSome(int fd, char* p, size_t n) {
    for (;;) {
      ssize_t r = ::read(fd, p, n);
      if (r < 0 && errno == EINTR) continue;
      return r;
    }
  }

  UniqueFd listener_;
  uint16_t port_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int live_ = 0;
  std::optional<Clock::time_point> sink_done_;
};

// ---------------------------------------------------------------------------------------------
// The client.

Result<UniqueFd> Connect(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("socket(AF_INET)", errno);
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return ErrnoError(fmt::format("connect(127.0.0.1:{})", port), errno);
  }
  return fd;
}

// Seconds from connect() until the broker has every byte.
Result<double> Throughput(Broker& broker, uint16_t entry, uint64_t bytes) {
  if (!broker.WaitIdle(std::chrono::seconds(10))) {
    return UnavailableError("broker: the previous connection is still open");
  }
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
  ASSIGN_OR_RETURN(Clock::time_point done, broker.WaitSinkDone(std::chrono::seconds(120)));
  fd.reset();
  return std::chrono::duration<double>(done - start).count();
}

// Microseconds from socket() until the echoed first byte is back.
Result<double> FirstByte(Broker& broker, uint16_t entry) {
  if (!broker.WaitIdle(std::chrono::seconds(10))) {
    return UnavailableError("broker: the previous connection is still open");
  }
  Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(UniqueFd fd, Connect(entry));
  char c = 'E';
  RETURN_IF_ERROR(WriteAll(fd.get(), &c, 1));
  ssize_t n;
  do {
    n = ::read(fd.get(), &c, 1);
  } while (n < 0 && errno == EINTR);
  Clock::time_point end = Clock::now();
  if (n != 1) return InternalError("first byte: the echo did not come back");
  return std::chrono::duration<double, std::micro>(end - start).count();
}

// ---------------------------------------------------------------------------------------------
// The two bridges.

Result<uint16_t> PickFreePort() {
  ASSIGN_OR_RETURN(UniqueFd fd, ListenLoopbackTcp("127.0.0.1", 0));
  return LocalPort(fd.get());  // closed on return: free again a moment later
}

// Waits until something accepts on 127.0.0.1:port (socat binds after it starts).
Status WaitListening(uint16_t port) {
  for (int i = 0; i < 500; ++i) {
    if (Connect(port).ok()) return OkStatus();
    ::usleep(10000);
  }
  return UnavailableError(fmt::format("nothing listens on 127.0.0.1:{} after 5 s", port));
}

struct CodespaceChain {
  std::unique_ptr<BrokerBridge> bridge;
  ChildProcess sandbox_relay;
  uint16_t entry = 0;
};

Result<CodespaceChain> StartCodespaceChain(const Options& o, uint16_t broker_port) {
  CodespaceChain c;
  std::string sock = o.dir + "/codespace-bridge.sock";
  ASSIGN_OR_RETURN(c.bridge, BrokerBridge::Start(sock, BrokerAddress::Tcp("127.0.0.1", broker_port)));
  ASSIGN_OR_RETURN(Pipe ready, MakePipe());
  SpawnOptions s;
  s.argv = {"/proc/self/exe", "--sandbox-relay", sock, "3"};
  s.fds = {{ready.write.get(), 3}};
  s.parent_death_signal = SIGKILL;
  ASSIGN_OR_RETURN(c.sandbox_relay, Spawn(s));
  ready.write.reset();
  ASSIGN_OR_RETURN(std::string report, ReadAll(ready.read.get()));
  if (report.size() < 2 || report[0] != 'R') {
    return InternalError(fmt::format("in-sandbox relay did not start: {}", report));
  }
  c.entry = static_cast<uint16_t>(std::atoi(report.c_str() + 1));
  return c;
}

struct SocatChain {
  ChildProcess to_broker;  // UNIX-LISTEN → TCP broker (the worker side)
  ChildProcess entry_side; // TCP-LISTEN → UNIX-CONNECT (the sandbox side)
  uint16_t entry = 0;
};

Result<SocatChain> StartSocatChain(const Options& o, uint16_t broker_port,
                                   const std::string& name, const std::vector<std::string>& extra) {
  SocatChain c;
  std::string sock = o.dir + "/" + name + "-bridge.sock";
  ::unlink(sock.c_str());
  SpawnOptions a;
  a.argv = {o.socat};
  for (const auto& x : extra) a.argv.push_back(x);
  a.argv.push_back(fmt::format("UNIX-LISTEN:{},fork,unlink-early", sock));
  a.argv.push_back(fmt::format("TCP:127.0.0.1:{},nodelay", broker_port));
  a.parent_death_signal = SIGKILL;
  ASSIGN_OR_RETURN(c.to_broker, Spawn(a));
  ASSIGN_OR_RETURN(c.entry, PickFreePort());
  SpawnOptions b;
  b.argv = {o.socat};
  for (const auto& x : extra) b.argv.push_back(x);
  b.argv.push_back(fmt::format("TCP-LISTEN:{},bind=127.0.0.1,reuseaddr,fork,nodelay", c.entry));
  b.argv.push_back(fmt::format("UNIX-CONNECT:{}", sock));
  b.parent_death_signal = SIGKILL;
  ASSIGN_OR_RETURN(c.entry_side, Spawn(b));
  for (int i = 0; i < 500 && ::access(sock.c_str(), F_OK) != 0; ++i) ::usleep(10000);
  RETURN_IF_ERROR(WaitListening(c.entry));
  return c;
}

std::string JsonList(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{:.6g}", i ? ", " : "", v[i]);
  return s + "]";
}

Status Main(const Options& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<Broker> broker, Broker::Start());
  ASSIGN_OR_RETURN(CodespaceChain cs, StartCodespaceChain(o, broker->port()));
  // socat as it comes (8 KiB buffer), and with the relay's 64 KiB.
  ASSIGN_OR_RETURN(SocatChain so, StartSocatChain(o, broker->port(), "socat", {}));
  ASSIGN_OR_RETURN(SocatChain so64, StartSocatChain(o, broker->port(), "socat64k", {"-b65536"}));
  // WaitListening's probe connections reached the broker too: let them drain.
  if (!broker->WaitIdle(std::chrono::seconds(5))) return UnavailableError("broker never idle");

  struct Path {
    std::string name;
    uint16_t entry;
    std::vector<double> seconds, first_byte_us;
  };
  std::vector<Path> paths = {{"relay", cs.entry, {}, {}},
                             {"socat", so.entry, {}, {}},
                             {"socat64k", so64.entry, {}, {}},
                             {"direct", broker->port(), {}, {}}};
  // One small warm-up each (page cache, socat's first fork), not counted.
  for (const Path& p : paths) RETURN_IF_ERROR(Throughput(*broker, p.entry, 16 << 20).status());
  for (int i = 0; i < o.reps; ++i) {
    for (Path& p : paths) {
      ASSIGN_OR_RETURN(double t, Throughput(*broker, p.entry, o.bytes));
      p.seconds.push_back(t);
    }
  }
  for (int i = 0; i < o.ttfb_reps; ++i) {
    for (Path& p : paths) {
      ASSIGN_OR_RETURN(double t, FirstByte(*broker, p.entry));
      p.first_byte_us.push_back(t);
    }
  }
  std::string out = fmt::format("{{\"bytes\": {}, \"bridge_bytes_to_broker\": {}", o.bytes,
                                cs.bridge->stats().bytes_to_target);
  for (const Path& p : paths) {
    out += fmt::format(", \"{}\": {{\"throughput_s\": {}, \"first_byte_us\": {}}}", p.name,
                       JsonList(p.seconds), JsonList(p.first_byte_us));
  }
  fmt::print("{}}}\n", out);
  cs.bridge->Stop();
  for (ChildProcess* c : {&cs.sandbox_relay, &so.to_broker, &so.entry_side, &so64.to_broker,
                          &so64.entry_side}) {
    c->Signal(SIGKILL).IgnoreError();
    auto reaped = c->Wait();
    (void)reaped;
  }
  return OkStatus();
}

}  // namespace
}  // namespace codespace::bench

int main(int argc, char** argv) {
  using codespace::bench::Options;
  // The in-sandbox half, re-executed: relay_bench --sandbox-relay SOCKET READY_FD
  if (argc == 4 && std::string(argv[1]) == "--sandbox-relay") {
    return codespace::RunSandboxRelay(0, argv[2], std::atoi(argv[3]));
  }
  ::signal(SIGPIPE, SIG_IGN);
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "relay_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--bytes") o.bytes = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--reps") o.reps = std::atoi(value().c_str());
    else if (a == "--ttfb-reps") o.ttfb_reps = std::atoi(value().c_str());
    else if (a == "--socat") o.socat = value();
    else if (a == "--dir") o.dir = value();
    else {
      std::fprintf(stderr,
                   "usage: relay_bench --dir DIR [--bytes N] [--reps R] [--ttfb-reps M] "
                   "[--socat PATH]\n");
      return 2;
    }
  }
  if (o.dir.empty()) {
    std::fprintf(stderr, "relay_bench: --dir is required (where the unix sockets go)\n");
    return 2;
  }
  codespace::Status s = codespace::bench::Main(o);
  if (!s.ok()) {
    std::fprintf(stderr, "relay_bench: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
