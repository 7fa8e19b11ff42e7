// Test helpers for the relay: seeded byte streams, blocking clients, and a threaded test broker.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/status.h"
#include "base/unique_fd.h"
#include "relay/relay.h"

namespace codespace::relay_testing {

// A reproducible pseudo-random byte stream (splitmix64): the sender and the checker each run one
// with the same seed, so gigabytes are compared byte for byte without being stored.
class ByteStream {
 public:
  explicit ByteStream(uint64_t seed) : state_(seed) {}
  void Fill(char* out, size_t n);
  // Compares `n` bytes of `data` with the stream's next `n`; false at the first difference.
  bool Check(const char* data, size_t n);

 private:
  uint64_t Next();
  uint64_t state_;
  uint64_t word_ = 0;
  int left_ = 0;  // bytes of word_ not handed out yet
};

// Entries of /proc/self/fd (minus the one the listing itself opens).
int CountOpenFds();

// A blocking, close-on-exec stream socket connected to `address`.
Result<UniqueFd> ConnectTo(const BrokerAddress& address);
// A port on 127.0.0.1 that was free a moment ago.
Result<uint16_t> PickFreePort();

// Reads until EOF (or an error such as ECONNRESET, reported in the status), waiting at most
// `timeout` overall.
Result<std::string> ReadToEof(int fd, std::chrono::milliseconds timeout = std::chrono::seconds(10));
// Reads exactly `n` bytes.
Result<std::string> ReadExactly(int fd, size_t n,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Sends `bytes` of ByteStream(seed) on `fd`, shuts down writing, and checks that exactly the same
// bytes come back before EOF (an echo broker), reading while writing. `fd` is made non-blocking.
Status EchoExchange(int fd, uint64_t seed, size_t bytes,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20));

// Echoes until EOF, then shuts down writing.
void EchoHandler(int fd);

// A broker for tests: accepts on its listener and runs `handler(fd)` on a thread per connection
// (fd blocking; closed when the handler returns).
class TestBroker {
 public:
  using Handler = std::function<void(int fd)>;
  static Result<std::unique_ptr<TestBroker>> Start(UniqueFd listener, Handler handler);
  TestBroker(const TestBroker&) = delete;
  TestBroker& operator=(const TestBroker&) = delete;
  ~TestBroker() { Stop(); }

  // Shuts every connection down (handlers see EOF/EPIPE), joins all threads, closes everything.
  void Stop();
  int accepted() const { return accepted_.load(); }
  int active() const { return active_.load(); }

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  TestBroker(UniqueFd listener, UniqueFd wake, Handler handler)
      : listener_(std::move(listener)), wake_(std::move(wake)), handler_(std::move(handler)) {}
  void AcceptLoop();

  UniqueFd listener_;
  UniqueFd wake_;
  Handler handler_;
  std::thread accept_thread_;
  std::mutex mu_;
  std::set<int> open_;  // connection fds still open (shut down by Stop)
  std::list<Worker> workers_;
  std::atomic<int> accepted_{0};
  std::atomic<int> active_{0};
  bool stopped_ = false;
};

// Waits until `pred` holds, polling, at most `timeout`.
bool WaitFor(const std::function<bool()>& pred,
             std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace codespace::relay_testing
