// Relay: the byte-shuttling engine behind a run's broker (SPEC "broker").
//
// A Relay accepts connections on listening sockets it is given and forwards each one to a single
// fixed target, the broker: a unix socket path or a loopback TCP host:port. It connects nowhere
// else, whatever a client sends: it never parses the stream.
//
// Two Relays make a brokered run (see broker_bridge.h and sandbox_relay.h):
//
//   command ──TCP──> [in-sandbox relay, 127.0.0.1:<port>] ──unix, bind-mounted──>
//            [BrokerBridge in the run's supervisor, counts] ──unix or TCP──> broker
//
// Per accepted connection the relay starts a non-blocking connect to the target, then moves bytes
// both ways:
//   - zero-copy with splice(2) through one pipe per direction (TCP and unix stream sockets allow
//     it), falling back to read/write through a 64 KiB buffer per direction where splice is refused
//     (or when RelayOptions::use_splice is false). Memory is bounded: at most one pipe (64 KiB) or
//     one buffer per direction per connection; a full pipe stops reading from its source
//     (back-pressure travels to the sender through TCP/unix flow control);
//   - half-close: EOF from one side becomes shutdown(SHUT_WR) on the other once everything read
//     before the EOF is delivered; the other direction keeps flowing until its own EOF. The
//     connection is closed when both directions are done;
//   - errors (a reset, EPIPE, any failed syscall) close both sides at once; a reset from one TCP
//     side is passed on as a reset (SO_LINGER 0) to a TCP other side;
//   - a target that refuses or is down (or does not answer within connect_timeout) closes the
//     client's connection at once, with a reset when the client is TCP, so the client sees a
//     refused-looking ECONNRESET (or EOF over unix) promptly. The relay keeps accepting;
//   - at most max_connections at a time: a connection over the cap is accepted and closed at once.
//
// Threads: the relay runs one epoll event loop, on its own thread (Start) or on the caller's
// (Run). Stop() may be called from any other thread: it wakes the loop through an eventfd, closes
// every connection and listener, and returns when the loop has ended (joining its thread). After
// Stop() nothing the relay opened remains open. stats() may be called from any thread.
//
// SIGPIPE: the loop thread blocks SIGPIPE while it runs (a write to a peer that closed must be an
// EPIPE error, not a dead process) and discards one raised by its own writes before it unblocks.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "run/broker_address.h"

namespace codespace {

// Starts connections to the target, and nowhere else.
class Connector {
 public:
  static Result<Connector> Create(const BrokerAddress& target);

  // A new non-blocking, close-on-exec stream socket with a connect() to the target started.
  // `in_progress` is true when the connect completes later (EINPROGRESS, or EAGAIN from a unix
  // listener whose backlog is full: then call Retry on the same socket later).
  struct Attempt {
    UniqueFd fd;
    bool in_progress = false;
  };
  Result<Attempt> Start() const;
  // connect() again on a socket whose unix connect said EAGAIN. Same contract as Start.
  Result<bool> Retry(int fd) const;

  const BrokerAddress& target() const { return target_; }

 private:
  Connector(BrokerAddress target, BrokerSocketAddress address)
      : target_(std::move(target)), address_(address) {}
  BrokerAddress target_;
  BrokerSocketAddress address_;
};

struct RelayOptions {
  size_t max_connections = 1024;
  // Capacity of each direction's pipe (F_SETPIPE_SZ) or copy buffer.
  size_t pipe_size = 64 * 1024;
  // false: read/write through a buffer always (tests exercise the fallback with it).
  bool use_splice = true;
  // A target that neither accepts nor refuses within this time counts as down.
  std::chrono::milliseconds connect_timeout{10000};
};

// Counters, cumulative since the relay started (active_connections: now).
struct RelayStats {
  uint64_t connections_accepted = 0;  // accepted and admitted under the cap
  uint64_t connections_failed = 0;    // the target refused, was down or timed out
  uint64_t connections_rejected = 0;  // over max_connections (or out of descriptors)
  uint64_t bytes_to_target = 0;       // client → broker, delivered to the target socket
  uint64_t bytes_from_target = 0;     // broker → client, delivered to the client socket
  uint64_t active_connections = 0;
};

class Relay {
 public:
  // Takes ownership of `listeners` (listening stream sockets, TCP or unix; made non-blocking here)
  // and prepares the loop. Nothing is accepted before Start() or Run().
  static Result<std::unique_ptr<Relay>> Create(std::vector<UniqueFd> listeners,
                                               const BrokerAddress& target,
                                               RelayOptions options = {});
  static Result<std::unique_ptr<Relay>> Create(UniqueFd listener, const BrokerAddress& target,
                                               RelayOptions options = {});

  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;
  // Stops (see Stop).
  ~Relay();

  // Runs the loop on a new thread. At most one of Start and Run, once.
  Status Start();
  // Runs the loop on the caller's thread until Stop() is called from another thread (or forever).
  // Returns OK after a Stop, or the error that ended the loop (epoll failing).
  Status Run();
  // Ends the loop, closes every connection (in flight or not) and the listeners, and returns when
  // the loop has finished. Idempotent; callable from any thread but the loop's.
  void Stop();

  RelayStats stats() const;

 private:
  class Loop;

  explicit Relay(std::unique_ptr<Loop> loop);

  std::unique_ptr<Loop> loop_;  // owns the sockets, the epoll fd and the wake-up eventfd
  std::thread thread_;
  std::mutex mu_;
  std::mutex join_mu_;
  std::condition_variable done_cv_;
  bool started_ = false;  // Start or Run was called
  bool running_ = false;  // the loop is running (on thread_ or in Run)
  bool stopped_ = false;  // Stop was called
};

// A listening TCP socket on a loopback address ("127.0.0.1" or "::1"; IPv6 sockets are
// IPV6_V6ONLY), SO_REUSEADDR, non-blocking, close-on-exec. Port 0 picks a free port (see
// LocalPort).
Result<UniqueFd> ListenLoopbackTcp(const std::string& host, uint16_t port, int backlog = 1024);
// A listening unix stream socket at `path` (non-blocking, close-on-exec). The caller owns the file.
Result<UniqueFd> ListenUnix(const std::string& path, int backlog = 1024);
// The port a TCP socket is bound to.
Result<uint16_t> LocalPort(int fd);

}  // namespace codespace
