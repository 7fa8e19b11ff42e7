#include "relay/relay_test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace codespace::relay_testing {

using Clock = std::chrono::steady_clock;

uint64_t ByteStream::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void ByteStream::Fill(char* out, size_t n) {
  while (n > 0 && left_ > 0) {
    *out++ = static_cast<char>(word_ & 0xff);
    word_ >>= 8;
    --left_;
    --n;
  }
  while (n >= 8) {
    uint64_t w = Next();
    std::memcpy(out, &w, 8);  // little-endian: the same bytes as the byte-wise path
    out += 8;
    n -= 8;
  }
  if (n > 0) {
    word_ = Next();
    left_ = 8;
    while (n > 0) {
      *out++ = static_cast<char>(word_ & 0xff);
      word_ >>= 8;
      --left_;
      --n;
    }
  }
}

bool ByteStream::Check(const char* data, size_t n) {
  char expected[65536];
  while (n > 0) {
    size_t k = std::min(n, sizeof(expected));
    Fill(expected, k);
    if (std::memcmp(expected, data, k) != 0) return false;
    data += k;
    n -= k;
  }
  return true;
}

int CountOpenFds() {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;
}

Result<UniqueFd> ConnectTo(const BrokerAddress& address) {
  ASSIGN_OR_RETURN(BrokerSocketAddress sa, ResolveBrokerAddress(address));
  UniqueFd fd(::socket(sa.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("socket", errno);
  if (::connect(fd.get(), sa.get(), sa.length) != 0) {
    return ErrnoError(fmt::format("connect({})", address.ToString()), errno);
  }
  return fd;
}

Result<uint16_t> PickFreePort() {
  ASSIGN_OR_RETURN(UniqueFd fd, ListenLoopbackTcp("127.0.0.1", 0));
  return LocalPort(fd.get());
}

namespace {

// Waits for `events` on fd until `deadline`. False on timeout.
bool WaitFd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let the caller's syscall report it
  }
}

}  // namespace

Result<std::string> ReadToEof(int fd, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string out;
  char buf[65536];
  for (;;) {
    if (!WaitFd(fd, POLLIN, deadline)) {
      return UnavailableError(
          fmt::format("no EOF within {} ms ({} bytes read)", timeout.count(), out.size()));
    }
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      return out;
    } else if (errno != EAGAIN && errno != EINTR) {
      return ErrnoError(fmt::format("read (after {} bytes)", out.size()), errno);
    }
  }
}

Result<std::string> ReadExactly(int fd, size_t want, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string out;
  std::vector<char> buf(65536);
  while (out.size() < want) {
    if (!WaitFd(fd, POLLIN, deadline)) {
      return UnavailableError(
          fmt::format("read {} of {} bytes in {} ms", out.size(), want, timeout.count()));
    }
    ssize_t n = ::read(fd, buf.data(), std::min(buf.size(), want - out.size()));
    if (n > 0) {
      out.append(buf.data(), static_cast<size_t>(n));
    } else if (n == 0) {
      return UnavailableError(fmt::format("EOF after {} of {} bytes", out.size(), want));
    } else if (errno != EAGAIN && errno != EINTR) {
      return ErrnoError(fmt::format("read (after {} bytes)", out.size()), errno);
    }
  }
  return out;
}

Status EchoExchange(int fd, uint64_t seed, size_t bytes, std::chrono::milliseconds timeout) {
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  auto deadline = Clock::now() + timeout;
  ByteStream out_stream(seed), in_stream(seed);
  std::vector<char> out_buf(65536), in_buf(65536);
  size_t sent = 0, out_head = 0, out_tail = 0, received = 0;
  bool shut = false;
  for (;;) {
    if (sent == bytes && out_head == out_tail && !shut) {
      if (::shutdown(fd, SHUT_WR) != 0) return ErrnoError("shutdown(SHUT_WR)", errno);
      shut = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return UnavailableError(
          fmt::format("echo timed out: sent {} of {}, received {}", sent, bytes, received));
    }
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) return ErrnoError("poll", errno);
    if (n <= 0) continue;
    if (!shut && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
      if (out_head == out_tail && sent < bytes) {
        size_t k = std::min(out_buf.size(), bytes - sent);
        out_stream.Fill(out_buf.data(), k);
        out_head = 0;
        out_tail = k;
        sent += k;
      }
      if (out_head < out_tail) {
        ssize_t w = ::send(fd, out_buf.data() + out_head, out_tail - out_head, MSG_NOSIGNAL);
        if (w > 0) {
          out_head += static_cast<size_t>(w);
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
          return ErrnoError(fmt::format("send (sent {}, received {})", sent, received), errno);
        }
      }
    }
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
      ssize_t r = ::recv(fd, in_buf.data(), in_buf.size(), 0);
      if (r > 0) {
        size_t k = static_cast<size_t>(r);
        if (received + k > bytes) {
          return InternalError(fmt::format("echo longer than sent: {} > {}", received + k, bytes));
        }
        if (!in_stream.Check(in_buf.data(), k)) {
          return InternalError(
              fmt::format("echo differs within bytes {}..{}", received, received + k));
        }
        received += k;
      } else if (r == 0) {
        if (received != bytes) {
          return InternalError(fmt::format("EOF after {} of {} echoed bytes", received, bytes));
        }
        return OkStatus();
      } else if (errno != EAGAIN && errno != EINTR) {
        return ErrnoError(fmt::format("recv (sent {}, received {})", sent, received), errno);
      }
    }
  }
}

void EchoHandler(int fd) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (!WriteAll(fd, buf, static_cast<size_t>(n)).ok()) return;
  }
  ::shutdown(fd, SHUT_WR);
}

Result<std::unique_ptr<TestBroker>> TestBroker::Start(UniqueFd listener, Handler handler) {
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC));
  if (!wake) return ErrnoError("eventfd", errno);
  int flags = ::fcntl(listener.get(), F_GETFL);
  ::fcntl(listener.get(), F_SETFL, flags | O_NONBLOCK);
  std::unique_ptr<TestBroker> b(
      new TestBroker(std::move(listener), std::move(wake), std::move(handler)));
  b->accept_thread_ = std::thread([p = b.get()] { p->AcceptLoop(); });
  return b;
}

void TestBroker::AcceptLoop() {
  for (;;) {
    pollfd p[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    accepted_.fetch_add(1);
    active_.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu_);
    // Reap the handlers that finished, so that a long test does not pile up threads.
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
    open_.insert(fd);
    auto done = std::make_shared<std::atomic<bool>>(false);
    workers_.push_back(Worker{std::thread([this, fd, done] {
                                UniqueFd conn(fd);
                                handler_(fd);
                                {
                                  // Under the lock: Stop must not shut down a reused number.
                                  std::lock_guard<std::mutex> l(mu_);
                                  open_.erase(fd);
                                  conn.reset();
                                }
                                active_.fetch_sub(1);
                                done->store(true);
                              }),
                              done});
  }
}

void TestBroker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  uint64_t one = 1;
  ssize_t w = ::write(wake_.get(), &one, sizeof(one));
  (void)w;
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<Worker> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    workers.swap(workers_);
  }
  for (auto& w2 : workers) w2.thread.join();
  listener_.reset();
  wake_.reset();
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

}  // namespace codespace::relay_testing
