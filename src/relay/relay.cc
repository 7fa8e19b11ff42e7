#include "relay/relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace codespace {

// ---------------------------------------------------------------------------------------------
// Connector.

Result<Connector> Connector::Create(const BrokerAddress& target) {
  ASSIGN_OR_RETURN(BrokerSocketAddress address, ResolveBrokerAddress(target));
  return Connector(target, address);
}

Result<Connector::Attempt> Connector::Start() const {
  int fd = ::socket(address_.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError(fmt::format("socket(for broker {})", target_.ToString()), errno);
  Attempt attempt{UniqueFd(fd), false};
  ASSIGN_OR_RETURN(attempt.in_progress, Retry(fd));
  return attempt;
}

Result<bool> Connector::Retry(int fd) const {
  for (;;) {
    if (::connect(fd, address_.get(), address_.length) == 0) return false;
    int err = errno;
    if (err == EINTR) continue;
    // EAGAIN: a unix listener whose backlog is full (a TCP connect never says it).
    if (err == EINPROGRESS || err == EAGAIN || err == EALREADY) return true;
    if (err == EISCONN) return false;
    return ErrnoError(fmt::format("connect({})", target_.ToString()), err);
  }
}

// ---------------------------------------------------------------------------------------------
// Listening helpers.

Result<UniqueFd> ListenLoopbackTcp(const std::string& host, uint16_t port, int backlog) {
  BrokerAddress as_target = BrokerAddress::Tcp(host, port == 0 ? 1 : port);
  ASSIGN_OR_RETURN(BrokerSocketAddress address, ResolveBrokerAddress(as_target));
  if (address.family() == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&address.storage)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(&address.storage)->sin6_port = htons(port);
  }
  std::string where = address.family() == AF_INET6 ? fmt::format("[{}]:{}", host, port)
                                                   : fmt::format("{}:{}", host, port);
  UniqueFd fd(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError(fmt::format("socket(for {})", where), errno);
  int one = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return ErrnoError(fmt::format("setsockopt({}, SO_REUSEADDR)", where), errno);
  }
  if (address.family() == AF_INET6 &&
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) {
    return ErrnoError(fmt::format("setsockopt({}, IPV6_V6ONLY)", where), errno);
  }
  if (::bind(fd.get(), address.get(), address.length) != 0) {
    return ErrnoError(fmt::format("bind({})", where), errno);
  }
  if (::listen(fd.get(), backlog) != 0) return ErrnoError(fmt::format("listen({})", where), errno);
  return fd;
}

Result<UniqueFd> ListenUnix(const std::string& path, int backlog) {
  ASSIGN_OR_RETURN(BrokerSocketAddress address, ResolveBrokerAddress(BrokerAddress::Unix(path)));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError(fmt::format("socket(AF_UNIX for {})", path), errno);
  if (::bind(fd.get(), address.get(), address.length) != 0) {
    return ErrnoError(fmt::format("bind({})", path), errno);
  }
  if (::listen(fd.get(), backlog) != 0) return ErrnoError(fmt::format("listen({})", path), errno);
  return fd;
}

Result<uint16_t> LocalPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return ErrnoError(fmt::format("getsockname(fd {})", fd), errno);
  }
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return InvalidArgumentError(fmt::format("fd {} is not a TCP socket", fd));
}

// ---------------------------------------------------------------------------------------------
// The loop.

namespace {

using Clock = std::chrono::steady_clock;

// epoll_event.data.u64: (id << 2) | tag. Ids of connections start at 1; a stale event (for a
// connection closed earlier in the same batch) finds no connection and is dropped.
constexpr uint64_t kTagClient = 0;
constexpr uint64_t kTagTarget = 1;
constexpr uint64_t kTagListener = 2;  // id: index into listeners_
constexpr uint64_t kTagWake = 3;

constexpr uint64_t Tag(uint64_t id, uint64_t tag) { return (id << 2) | tag; }

// How often a unix connect that met a full backlog (EAGAIN) is tried again.
constexpr std::chrono::milliseconds kUnixRetryInterval{5};
// A connection gets at most this many pump rounds per wake-up before others get their turn.
constexpr int kRoundsPerTurn = 16;
// Connections accepted per listener per wake-up (the listener is level-triggered).
constexpr int kAcceptBatch = 64;

bool IsTcpFamily(int family) { return family == AF_INET || family == AF_INET6; }

int SocketFamily(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return AF_UNSPEC;
  return ss.ss_family;
}

void SetNoDelay(int fd) {
  // A relay forwards what it gets at once: Nagle would only delay the first bytes of an answer.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// close() after SO_LINGER 0 sends a reset: the peer learns that the stream broke, rather than
// reading a clean EOF that could pass for a complete answer.
void Abort(UniqueFd& fd, bool tcp) {
  if (!fd) return;
  if (tcp) {
    linger l{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  }
  fd.reset();
}

// One direction of a connection: bytes from `src` to `dst` through a pipe (splice) or a buffer.
struct Direction {
  bool use_splice = true;
  Pipe pipe;
  size_t capacity = 0;  // bytes the pipe or buffer holds at most
  size_t fill = 0;      // bytes in the pipe
  // splice() into a pipe that holds data says EAGAIN both when the socket is empty and when the
  // pipe has no free slot (a slot may hold less than a page). Either way: stop reading until the
  // pipe drained some; reading again then tells which it was.
  bool in_blocked = false;
  std::unique_ptr<char[]> buffer;  // copy mode
  size_t head = 0, tail = 0;       // copy mode: bytes [head, tail) are pending
  bool eof = false;                // src said EOF
  bool shut = false;               // dst was shut down for writing: this direction is done

  bool empty() const { return use_splice ? fill == 0 : head == tail; }
};

}  // namespace

class Relay::Loop {
 public:
  struct Counters {
    std::atomic<uint64_t> accepted{0}, failed{0}, rejected{0}, to_target{0}, from_target{0},
        active{0};
  };

  Loop(std::vector<UniqueFd> listeners, std::vector<bool> listener_tcp, Connector connector,
       RelayOptions options, UniqueFd epoll, UniqueFd wake, UniqueFd reserve)
      : listeners_(std::move(listeners)),
        listener_tcp_(std::move(listener_tcp)),
        connector_(std::move(connector)),
        target_tcp_(connector_.target().kind == BrokerAddress::Kind::kTcp),
        options_(options),
        epoll_(std::move(epoll)),
        wake_(std::move(wake)),
        reserve_(std::move(reserve)) {}

  ~Loop() { CloseAll(); }

  Status Run();
  void Wake() {
    uint64_t one = 1;
    ssize_t n = ::write(wake_.get(), &one, sizeof(one));
    (void)n;  // the counter cannot overflow from Stop's single write
  }
  // Closes every connection (reset) and every listener. Only when the loop does not run.
  void CloseAll();

  const Counters& counters() const { return counters_; }

 private:
  enum class State { kConnecting, kRetryWait, kOpen };
  struct Conn {
    uint64_t id = 0;
    UniqueFd client, target;
    bool client_tcp = false;
    State state = State::kConnecting;
    Clock::time_point connect_deadline;
    bool client_readable = false, client_writable = false;
    bool target_readable = false, target_writable = false;
    bool target_registered = false;
    Direction up;    // client → target
    Direction down;  // target → client
  };

  void Accept(size_t index);
  void StartConnect(Conn& c);
  void OnConnectReady(Conn& c);
  void ConnectFailed(Conn& c);
  bool Open(Conn& c);
  void OnEvent(uint64_t data, uint32_t events);
  // Moves what can be moved now; closes the connection when done or broken.
  void Service(Conn& c);
  enum class Pumped { kIdle, kProgress, kError };
  Pumped Pump(Direction& d, int src, int dst, bool& src_readable, bool& dst_writable,
              std::atomic<uint64_t>& counter);
  void Close(Conn& c, bool abort);
  void RunTimers();
  int NextTimeoutMs() const;

  std::vector<UniqueFd> listeners_;
  std::vector<bool> listener_tcp_;
  Connector connector_;
  bool target_tcp_;
  RelayOptions options_;
  UniqueFd epoll_;
  UniqueFd wake_;
  // Held open so that, when accept() says EMFILE, closing it frees the one descriptor needed to
  // accept the pending connection and close it: otherwise a level-triggered listener would wake
  // the loop forever.
  UniqueFd reserve_;

  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::multimap<Clock::time_point, uint64_t> timers_;
  // Connections that still had work when their turn ended (edge-triggered: no event will come).
  std::unordered_set<uint64_t> ready_;
  Counters counters_;
};

void Relay::Loop::CloseAll() {
  for (auto& [id, c] : conns_) {
    Abort(c->client, c->client_tcp);
    Abort(c->target, target_tcp_);
  }
  counters_.active.fetch_sub(conns_.size(), std::memory_order_relaxed);
  conns_.clear();
  timers_.clear();
  ready_.clear();
  listeners_.clear();
}

Status Relay::Loop::Run() {
  // Block SIGPIPE on this thread: a splice or write to a peer that closed must fail with EPIPE
  // rather than end the process. It is thread-directed, so it stays pending here; dropped below.
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);

  Status status;
  for (size_t i = 0; i < listeners_.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = Tag(i, kTagListener);
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listeners_[i].get(), &ev) != 0) {
      status = ErrnoError(fmt::format("epoll_ctl(ADD listener fd {})", listeners_[i].get()), errno);
    }
  }
  {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = Tag(0, kTagWake);
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) {
      status = ErrnoError("epoll_ctl(ADD eventfd)", errno);
    }
  }

  bool stop = !status.ok();
  epoll_event events[256];
  while (!stop) {
    int timeout = ready_.empty() ? NextTimeoutMs() : 0;
    int n = ::epoll_wait(epoll_.get(), events, 256, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      status = ErrnoError("epoll_wait", errno);
      break;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t data = events[i].data.u64;
      if ((data & 3) == kTagWake) {
        stop = true;
        break;
      }
      OnEvent(data, events[i].events);
    }
    if (stop) break;
    RunTimers();
    if (!ready_.empty()) {
      std::vector<uint64_t> turn(ready_.begin(), ready_.end());
      ready_.clear();
      for (uint64_t id : turn) {
        auto it = conns_.find(id);
        if (it != conns_.end()) Service(*it->second);
      }
    }
  }
  CloseAll();

  // Drop a SIGPIPE our own writes raised, so unblocking does not deliver it.
  timespec zero{0, 0};
  while (::sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  return status;
}

int Relay::Loop::NextTimeoutMs() const {
  if (timers_.empty()) return -1;
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(timers_.begin()->first - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(wait.count(), 0, 60000));
}

void Relay::Loop::RunTimers() {
  auto now = Clock::now();
  while (!timers_.empty() && timers_.begin()->first <= now) {
    uint64_t id = timers_.begin()->second;
    timers_.erase(timers_.begin());
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    Conn& c = *it->second;
    if (c.state == State::kOpen) continue;
    if (now >= c.connect_deadline) {
      ConnectFailed(c);
    } else if (c.state == State::kRetryWait) {
      auto again = connector_.Retry(c.target.get());
      if (!again.ok()) {
        ConnectFailed(c);
      } else if (*again) {
        // Still EAGAIN (a unix backlog that is still full): try again shortly.
        timers_.emplace(std::min(now + kUnixRetryInterval, c.connect_deadline), c.id);
      } else {
        c.state = State::kConnecting;
        OnConnectReady(c);
      }
    }
  }
}

void Relay::Loop::Accept(size_t index) {
  int listener = listeners_[index].get();
  for (int i = 0; i < kAcceptBatch; ++i) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      if ((err == EMFILE || err == ENFILE) && reserve_) {
        reserve_.reset();
        UniqueFd drop(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
        if (drop) counters_.rejected.fetch_add(1, std::memory_order_relaxed);
        drop.reset();
        reserve_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      }
      return;  // EAGAIN, or a shortage the next wake-up retries
    }
    UniqueFd client(fd);
    bool tcp = listener_tcp_[index];
    if (conns_.size() >= options_.max_connections) {
      counters_.rejected.fetch_add(1, std::memory_order_relaxed);
      Abort(client, tcp);
      continue;
    }
    if (tcp) SetNoDelay(client.get());
    auto conn = std::make_unique<Conn>();
    Conn& c = *conn;
    c.id = next_id_++;
    c.client = std::move(client);
    c.client_tcp = tcp;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = Tag(c.id, kTagClient);
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.client.get(), &ev) != 0) {
      counters_.rejected.fetch_add(1, std::memory_order_relaxed);
      Abort(c.client, tcp);
      continue;
    }
    conns_.emplace(c.id, std::move(conn));
    counters_.accepted.fetch_add(1, std::memory_order_relaxed);
    counters_.active.fetch_add(1, std::memory_order_relaxed);
    StartConnect(c);
  }
}

void Relay::Loop::StartConnect(Conn& c) {
  c.connect_deadline = Clock::now() + options_.connect_timeout;
  auto attempt = connector_.Start();
  if (!attempt.ok()) {
    ConnectFailed(c);
    return;
  }
  c.target = std::move(attempt->fd);
  if (target_tcp_) SetNoDelay(c.target.get());
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = Tag(c.id, kTagTarget);
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.target.get(), &ev) != 0) {
    ConnectFailed(c);
    return;
  }
  c.target_registered = true;
  if (!attempt->in_progress) {
    OnConnectReady(c);
    return;
  }
  if (connector_.target().kind == BrokerAddress::Kind::kUnix) {
    // A unix connect in progress means EAGAIN (a full backlog): no event will say when to retry.
    c.state = State::kRetryWait;
    timers_.emplace(std::min(Clock::now() + kUnixRetryInterval, c.connect_deadline), c.id);
  } else {
    c.state = State::kConnecting;
    timers_.emplace(c.connect_deadline, c.id);
  }
}

// The target socket became writable (or failed) while connecting, or connect() returned 0.
void Relay::Loop::OnConnectReady(Conn& c) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(c.target.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    ConnectFailed(c);
    return;
  }
  if (!Open(c)) return;
  Service(c);
}

void Relay::Loop::ConnectFailed(Conn& c) {
  counters_.failed.fetch_add(1, std::memory_order_relaxed);
  Close(c, /*abort=*/true);
}

bool Relay::Loop::Open(Conn& c) {
  c.state = State::kOpen;
  // The connect completed: the socket is writable now, and EPOLLOUT (edge) already went by.
  c.target_writable = true;
  c.target_readable = true;  // cheap to check once; EAGAIN clears it
  for (Direction* d : {&c.up, &c.down}) {
    d->use_splice = options_.use_splice;
    if (d->use_splice) {
      auto pipe = MakePipe(O_NONBLOCK);
      if (pipe.ok()) {
        d->pipe = std::move(*pipe);
        // The default is 64 KiB; a smaller size keeps the memory bound at what the caller asked.
        ::fcntl(d->pipe.write.get(), F_SETPIPE_SZ, static_cast<int>(options_.pipe_size));
        int size = ::fcntl(d->pipe.write.get(), F_GETPIPE_SZ);
        d->capacity = size > 0 ? static_cast<size_t>(size) : 4096;
      } else {
        d->use_splice = false;  // out of descriptors: copy through a buffer instead
      }
    }
    if (!d->use_splice) {
      d->capacity = options_.pipe_size;
      d->buffer = std::make_unique<char[]>(d->capacity);
    }
  }
  return true;
}

void Relay::Loop::OnEvent(uint64_t data, uint32_t events) {
  uint64_t tag = data & 3;
  uint64_t id = data >> 2;
  if (tag == kTagListener) {
    Accept(id);
    return;
  }
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  bool error = (events & EPOLLERR) != 0;
  bool readable = (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
  bool writable = (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0;
  if (tag == kTagClient) {
    c.client_readable |= readable;
    c.client_writable |= writable;
    if (error && c.state != State::kOpen) {
      // The client went away before the target answered: not the target's failure.
      Close(c, /*abort=*/true);
      return;
    }
  } else {
    if (c.state == State::kConnecting) {
      if (writable) OnConnectReady(c);
      return;
    }
    if (c.state == State::kRetryWait) return;
    c.target_readable |= readable;
    c.target_writable |= writable;
  }
  if (c.state != State::kOpen) return;
  if (error) {
    // A reset. Checked here, not left to the next splice: a direction that is done (EOF seen)
    // with nothing to write would never touch the socket again, and the connection would stay.
    int err = 0;
    socklen_t len = sizeof(err);
    int fd = tag == kTagClient ? c.client.get() : c.target.get();
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      Close(c, /*abort=*/true);
      return;
    }
  }
  Service(c);
}

Relay::Loop::Pumped Relay::Loop::Pump(Direction& d, int src, int dst, bool& src_readable,
                                      bool& dst_writable, std::atomic<uint64_t>& counter) {
  bool progress = false;
  for (;;) {
    bool moved = false;
    // Out first: it frees room for reading.
    if (!d.empty() && dst_writable) {
      ssize_t n;
      if (d.use_splice) {
        n = ::splice(d.pipe.read.get(), nullptr, dst, nullptr, d.fill,
                     SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      } else {
        n = ::send(dst, d.buffer.get() + d.head, d.tail - d.head, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      if (n > 0) {
        size_t got = static_cast<size_t>(n);
        if (d.use_splice) {
          d.fill -= got;
        } else {
          d.head += got;
          if (d.head == d.tail) d.head = d.tail = 0;
        }
        d.in_blocked = false;
        counter.fetch_add(got, std::memory_order_relaxed);
        moved = true;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        dst_writable = false;
      } else if (n < 0 && errno == EINTR) {
        moved = true;
      } else {
        return Pumped::kError;  // EPIPE, ECONNRESET, ...
      }
    }
    if (!d.eof && src_readable && !d.in_blocked) {
      if (d.use_splice && d.fill < d.capacity) {
        ssize_t n = ::splice(src, nullptr, d.pipe.write.get(), nullptr, d.capacity - d.fill,
                             SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0) {
          d.fill += static_cast<size_t>(n);
          moved = true;
        } else if (n == 0) {
          d.eof = true;
          moved = true;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
          if (d.fill == 0) {
            src_readable = false;
          } else {
            d.in_blocked = true;
          }
        } else if (errno == EINTR) {
          moved = true;
        } else if ((errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) && d.fill == 0) {
          // This socket type cannot splice: copy through a buffer from now on.
          d.use_splice = false;
          d.pipe = Pipe{};
          d.capacity = options_.pipe_size;
          d.buffer = std::make_unique<char[]>(d.capacity);
          moved = true;
        } else {
          return Pumped::kError;
        }
      } else if (!d.use_splice) {
        if (d.tail == d.capacity && d.head > 0) {
          std::memmove(d.buffer.get(), d.buffer.get() + d.head, d.tail - d.head);
          d.tail -= d.head;
          d.head = 0;
        }
        if (d.tail < d.capacity) {
          ssize_t n = ::read(src, d.buffer.get() + d.tail, d.capacity - d.tail);
          if (n > 0) {
            d.tail += static_cast<size_t>(n);
            moved = true;
          } else if (n == 0) {
            d.eof = true;
            moved = true;
          } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            src_readable = false;
          } else if (errno == EINTR) {
            moved = true;
          } else {
            return Pumped::kError;
          }
        }
      }
    }
    if (!moved) break;
    progress = true;
  }
  if (d.eof && d.empty() && !d.shut) {
    // Everything sent before the EOF is delivered: pass the EOF on, keep the other way open.
    // ENOTCONN: the peer is gone already; the other direction's next write tells.
    ::shutdown(dst, SHUT_WR);
    d.shut = true;
    progress = true;
  }
  return progress ? Pumped::kProgress : Pumped::kIdle;
}

void Relay::Loop::Service(Conn& c) {
  for (int round = 0; round < kRoundsPerTurn; ++round) {
    Pumped up = Pump(c.up, c.client.get(), c.target.get(), c.client_readable, c.target_writable,
                     counters_.to_target);
    if (up == Pumped::kError) return Close(c, /*abort=*/true);
    Pumped down = Pump(c.down, c.target.get(), c.client.get(), c.target_readable, c.client_writable,
                       counters_.from_target);
    if (down == Pumped::kError) return Close(c, /*abort=*/true);
    if (c.up.shut && c.down.shut) return Close(c, /*abort=*/false);
    if (up == Pumped::kIdle && down == Pumped::kIdle) return;
  }
  ready_.insert(c.id);  // more to do: after the others had their turn
}

void Relay::Loop::Close(Conn& c, bool abort) {
  // Closing a descriptor removes it from the epoll set (no dup of it exists).
  if (abort) {
    Abort(c.client, c.client_tcp);
    Abort(c.target, target_tcp_);
  }
  counters_.active.fetch_sub(1, std::memory_order_relaxed);
  ready_.erase(c.id);
  conns_.erase(c.id);  // destroys c: sockets, pipes, buffers
}

// ---------------------------------------------------------------------------------------------
// Relay.

Relay::Relay(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}

Relay::~Relay() { Stop(); }

Result<std::unique_ptr<Relay>> Relay::Create(UniqueFd listener, const BrokerAddress& target,
                                             RelayOptions options) {
  std::vector<UniqueFd> listeners;
  listeners.push_back(std::move(listener));
  return Create(std::move(listeners), target, options);
}

Result<std::unique_ptr<Relay>> Relay::Create(std::vector<UniqueFd> listeners,
                                             const BrokerAddress& target, RelayOptions options) {
  if (listeners.empty()) return InvalidArgumentError("relay: no listening socket");
  if (options.max_connections == 0 || options.pipe_size < 4096) {
    return InvalidArgumentError("relay: max_connections must be > 0 and pipe_size >= 4096");
  }
  ASSIGN_OR_RETURN(Connector connector, Connector::Create(target));
  std::vector<bool> tcp;
  for (const UniqueFd& l : listeners) {
    if (!l) return InvalidArgumentError("relay: invalid listening socket");
    int flags = ::fcntl(l.get(), F_GETFL);
    if (flags < 0 || ::fcntl(l.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
      return ErrnoError(fmt::format("fcntl(listener fd {}, O_NONBLOCK)", l.get()), errno);
    }
    tcp.push_back(IsTcpFamily(SocketFamily(l.get())));
  }
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll) return ErrnoError("epoll_create1", errno);
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return ErrnoError("eventfd", errno);
  ASSIGN_OR_RETURN(UniqueFd reserve, OpenFile("/dev/null", O_RDONLY));
  return std::unique_ptr<Relay>(new Relay(
      std::make_unique<Loop>(std::move(listeners), std::move(tcp), std::move(connector), options,
                             std::move(epoll), std::move(wake), std::move(reserve))));
}

Status Relay::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return FailedPreconditionError("relay: already started (or stopped)");
  started_ = running_ = true;
  thread_ = std::thread([this] {
    Status s = loop_->Run();
    if (!s.ok()) fmt::print(stderr, "codespace relay: {}\n", s.ToString());
    std::lock_guard<std::mutex> done(mu_);
    running_ = false;
    done_cv_.notify_all();
  });
  return OkStatus();
}

Status Relay::Run() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return FailedPreconditionError("relay: already started (or stopped)");
    started_ = running_ = true;
  }
  Status s = loop_->Run();
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
  done_cv_.notify_all();
  return s;
}

void Relay::Stop() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_) {
    // Never ran: close what it holds now, and refuse to start later.
    started_ = stopped_ = true;
    loop_->CloseAll();
    return;
  }
  if (!stopped_) {
    stopped_ = true;
    loop_->Wake();
  }
  done_cv_.wait(lock, [this] { return !running_; });
  lock.unlock();
  std::lock_guard<std::mutex> join(join_mu_);  // two concurrent Stops must not both join
  if (thread_.joinable()) thread_.join();
}

RelayStats Relay::stats() const {
  const auto& c = loop_->counters();
  RelayStats s;
  s.connections_accepted = c.accepted.load(std::memory_order_relaxed);
  s.connections_failed = c.failed.load(std::memory_order_relaxed);
  s.connections_rejected = c.rejected.load(std::memory_order_relaxed);
  s.bytes_to_target = c.to_target.load(std::memory_order_relaxed);
  s.bytes_from_target = c.from_target.load(std::memory_order_relaxed);
  s.active_connections = c.active.load(std::memory_order_relaxed);
  return s;
}

}  // namespace codespace
