#include "relay/relay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "relay/relay_test_util.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;
using relay_testing::ByteStream;
using relay_testing::ConnectTo;
using relay_testing::CountOpenFds;
using relay_testing::EchoExchange;
using relay_testing::EchoHandler;
using relay_testing::ReadExactly;
using relay_testing::ReadToEof;
using relay_testing::TestBroker;
using relay_testing::WaitFor;
using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = 1024 * 1024;

TEST(ConnectorTest, RefusesNonLoopbackTargetsBuiltByHand) {
  EXPECT_THAT(Connector::Create(BrokerAddress::Tcp("10.1.2.3", 80)),
              StatusHasMessage("not a loopback address"));
  EXPECT_THAT(Connector::Create(BrokerAddress::Tcp("example.com", 80)),
              StatusHasMessage("not a loopback address"));
  EXPECT_THAT(Connector::Create(BrokerAddress::Unix("")), StatusIs(StatusCode::kInvalidArgument));
}

// ---------------------------------------------------------------------------------------------
// Fixtures: a broker (unix or TCP) and a relay to it on 127.0.0.1:<free port>.

enum class TargetKind { kUnix, kTcp };

struct Broker {
  std::unique_ptr<TestBroker> server;
  BrokerAddress address;
};

Result<Broker> StartBroker(TargetKind kind, const std::string& dir, TestBroker::Handler handler,
                           int backlog = 1024) {
  Broker b;
  UniqueFd listener;
  if (kind == TargetKind::kUnix) {
    b.address = BrokerAddress::Unix(dir + "/broker.sock");
    ASSIGN_OR_RETURN(listener, ListenUnix(b.address.path, backlog));
  } else {
    ASSIGN_OR_RETURN(listener, ListenLoopbackTcp("127.0.0.1", 0, backlog));
    ASSIGN_OR_RETURN(uint16_t port, LocalPort(listener.get()));
    b.address = BrokerAddress::Tcp("127.0.0.1", port);
  }
  ASSIGN_OR_RETURN(b.server, TestBroker::Start(std::move(listener), std::move(handler)));
  return b;
}

struct RunningRelay {
  std::unique_ptr<Relay> relay;
  BrokerAddress address;  // where clients connect
};

Result<RunningRelay> StartRelay(const BrokerAddress& target, RelayOptions options = {}) {
  ASSIGN_OR_RETURN(UniqueFd listener, ListenLoopbackTcp("127.0.0.1", 0));
  ASSIGN_OR_RETURN(uint16_t port, LocalPort(listener.get()));
  RunningRelay r;
  r.address = BrokerAddress::Tcp("127.0.0.1", port);
  ASSIGN_OR_RETURN(r.relay, Relay::Create(std::move(listener), target, options));
  RETURN_IF_ERROR(r.relay->Start());
  return r;
}

bool Idle(const Relay& relay) { return relay.stats().active_connections == 0; }

// ---------------------------------------------------------------------------------------------
// Many parallel connections, checked byte for byte.

struct ParallelCase {
  const char* name;
  TargetKind target;
  bool use_splice;
  int connections;
  size_t bytes_each;
};

class ParallelTest : public ::testing::TestWithParam<ParallelCase> {};

TEST_P(ParallelTest, ManyConnectionsEchoIntact) {
  const ParallelCase& p = GetParam();
  TempDir dir;
  auto broker = StartBroker(p.target, dir.path(), EchoHandler);
  ASSERT_OK(broker);
  RelayOptions options;
  options.use_splice = p.use_splice;
  auto relay = StartRelay(broker->address, options);
  ASSERT_OK(relay);

  auto start = Clock::now();
  std::vector<std::future<Status>> results;
  for (int i = 0; i < p.connections; ++i) {
    results.push_back(std::async(std::launch::async, [&, i]() -> Status {
      ASSIGN_OR_RETURN(UniqueFd fd, ConnectTo(relay->address));
      return EchoExchange(fd.get(), 1000 + static_cast<uint64_t>(i), p.bytes_each);
    }));
  }
  int failures = 0;
  for (auto& r : results) {
    Status s = r.get();
    if (!s.ok() && ++failures <= 3) ADD_FAILURE() << s.ToString();
  }
  EXPECT_EQ(failures, 0);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  double mib = static_cast<double>(p.bytes_each) * p.connections / kMiB;
  std::printf("[ parallel ] %s: %d connections x %zu KiB echoed in %.2f s (%.0f MiB/s each way)\n",
              p.name, p.connections, p.bytes_each / 1024, seconds, mib / seconds);

  ASSERT_TRUE(WaitFor([&] { return Idle(*relay->relay); }));
  RelayStats s = relay->relay->stats();
  EXPECT_EQ(s.connections_accepted, static_cast<uint64_t>(p.connections));
  EXPECT_EQ(s.connections_failed, 0u);
  EXPECT_EQ(s.connections_rejected, 0u);
  EXPECT_EQ(s.bytes_to_target, p.bytes_each * p.connections);
  EXPECT_EQ(s.bytes_from_target, p.bytes_each * p.connections);
}

INSTANTIATE_TEST_SUITE_P(
    Relay, ParallelTest,
    ::testing::Values(ParallelCase{"UnixSplice", TargetKind::kUnix, true, 200, 2 * kMiB},
                      ParallelCase{"TcpSplice", TargetKind::kTcp, true, 200, 1 * kMiB},
                      ParallelCase{"TcpCopy", TargetKind::kTcp, false, 200, 1 * kMiB},
                      ParallelCase{"UnixCopy", TargetKind::kUnix, false, 50, 1 * kMiB}),
    [](const ::testing::TestParamInfo<ParallelCase>& param_info) {
      return std::string(param_info.param.name);
    });

// ---------------------------------------------------------------------------------------------
// Half-close.

class HalfCloseTest : public ::testing::TestWithParam<TargetKind> {};

// The client shuts down writing first and still receives the broker's whole answer.
TEST_P(HalfCloseTest, ClientShutsDownWritingAndStillGetsTheWholeReply) {
  TempDir dir;
  constexpr size_t kRequest = 300 * 1024;
  constexpr size_t kReply = 3 * kMiB;
  std::atomic<size_t> request_seen{0};
  auto broker = StartBroker(GetParam(), dir.path(), [&](int fd) {
    auto request = ReadToEof(fd);  // waits for the client's EOF before answering
    if (!request.ok()) return;
    ByteStream expect(7);
    if (expect.Check(request->data(), request->size())) request_seen = request->size();
    std::string reply(kReply, '\0');
    ByteStream(8).Fill(reply.data(), reply.size());
    WriteAll(fd, reply).IgnoreError();
  });
  ASSERT_OK(broker);
  auto relay = StartRelay(broker->address);
  ASSERT_OK(relay);

  auto fd = ConnectTo(relay->address);
  ASSERT_OK(fd);
  std::string request(kRequest, '\0');
  ByteStream(7).Fill(request.data(), request.size());
  ASSERT_OK(WriteAll(fd->get(), request));
  ASSERT_EQ(::shutdown(fd->get(), SHUT_WR), 0);
  auto reply = ReadToEof(fd->get());
  ASSERT_OK(reply);
  EXPECT_EQ(request_seen.load(), kRequest);
  ASSERT_EQ(reply->size(), kReply);
  EXPECT_TRUE(ByteStream(8).Check(reply->data(), reply->size()));
  EXPECT_TRUE(WaitFor([&] { return Idle(*relay->relay); }));
}

// The broker shuts down writing first (its answer is complete); the client reads the EOF and can
// still send: TCP and unix stream sockets are full duplex until each side's FIN.
TEST_P(HalfCloseTest, BrokerShutsDownWritingAndClientCanStillSend) {
  TempDir dir;
  constexpr size_t kUpload = 2 * kMiB;
  std::promise<size_t> uploaded;
  auto broker = StartBroker(GetParam(), dir.path(), [&](int fd) {
    WriteAll(fd, "greeting, then silence\n").IgnoreError();
    ::shutdown(fd, SHUT_WR);
    auto rest = ReadToEof(fd);
    size_t good = 0;
    if (rest.ok() && ByteStream(9).Check(rest->data(), rest->size())) good = rest->size();
    uploaded.set_value(good);
  });
  ASSERT_OK(broker);
  auto relay = StartRelay(broker->address);
  ASSERT_OK(relay);

  auto fd = ConnectTo(relay->address);
  ASSERT_OK(fd);
  auto greeting = ReadToEof(fd->get());
  ASSERT_OK(greeting);
  EXPECT_EQ(*greeting, "greeting, then silence\n");
  std::string upload(kUpload, '\0');
  ByteStream(9).Fill(upload.data(), upload.size());
  ASSERT_OK(WriteAll(fd->get(), upload));
  ASSERT_EQ(::shutdown(fd->get(), SHUT_WR), 0);
  auto future = uploaded.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(future.get(), kUpload);
  EXPECT_TRUE(WaitFor([&] { return Idle(*relay->relay); }));
  RelayStats s = relay->relay->stats();
  EXPECT_EQ(s.bytes_to_target, kUpload);
  EXPECT_EQ(s.bytes_from_target, 23u);
}

INSTANTIATE_TEST_SUITE_P(Relay, HalfCloseTest,
                         ::testing::Values(TargetKind::kUnix, TargetKind::kTcp),
                         [](const ::testing::TestParamInfo<TargetKind>& param_info) {
                           return param_info.param == TargetKind::kUnix ? "Unix" : "Tcp";
                         });

// ---------------------------------------------------------------------------------------------
// A broker that is down, slow, or resets.

// The client's connection is closed at once (a reset: it reads ECONNRESET, or EOF), and the relay
// keeps accepting: once the broker is up, the next connection goes through.
TEST(RelayTest, BrokerDownClosesTheClientPromptlyAndRelaySurvives) {
  TempDir dir;
  BrokerAddress unix_target = BrokerAddress::Unix(dir.path() + "/broker.sock");
  auto relay = StartRelay(unix_target);
  ASSERT_OK(relay);
  for (int i = 0; i < 3; ++i) {
    auto fd = ConnectTo(relay->address);
    ASSERT_OK(fd);
    auto start = Clock::now();
    auto got = ReadToEof(fd->get(), std::chrono::seconds(2));
    auto elapsed = Clock::now() - start;
    if (got.ok()) {
      EXPECT_EQ(*got, "");
    } else {
      EXPECT_THAT(got, StatusHasMessage("Connection reset"));
    }
    EXPECT_LT(elapsed, std::chrono::milliseconds(500));
  }
  EXPECT_TRUE(WaitFor([&] { return Idle(*relay->relay); }));
  EXPECT_EQ(relay->relay->stats().connections_failed, 3u);

  auto broker = StartBroker(TargetKind::kUnix, dir.path(), EchoHandler);
  ASSERT_OK(broker);
  auto fd = ConnectTo(relay->address);
  ASSERT_OK(fd);
  EXPECT_OK(EchoExchange(fd->get(), 1, 100000));
  EXPECT_EQ(relay->relay->stats().connections_failed, 3u);
  EXPECT_EQ(relay->relay->stats().connections_accepted, 4u);
}

TEST(RelayTest, TcpBrokerRefusingResetsTheClient) {
  auto port = relay_testing::PickFreePort();
  ASSERT_OK(port);
  auto relay = StartRelay(BrokerAddress::Tcp("127.0.0.1", *port));
  ASSERT_OK(relay);
  auto fd = ConnectTo(relay->address);
  ASSERT_OK(fd);
  auto start = Clock::now();
  auto got = ReadToEof(fd->get(), std::chrono::seconds(2));
  EXPECT_THAT(got, StatusHasMessage("Connection reset"));
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_TRUE(WaitFor([&] { return relay->relay->stats().connections_failed == 1; }));
}

// A broker that sleeps before reading: everything queues behind back-pressure, nothing is lost.
TEST(RelayTest, SlowBrokerGetsEverythingIntact) {
  TempDir dir;
  auto broker = StartBroker(TargetKind::kUnix, dir.path(), [](int fd) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EchoHandler(fd);
  });
  ASSERT_OK(broker);
  auto relay = StartRelay(broker->address);
  ASSERT_OK(relay);
  std::vector<std::future<Status>> results;
  for (int i = 0; i < 4; ++i) {
    results.push_back(std::async(std::launch::async, [&, i]() -> Status {
      ASSIGN_OR_RETURN(UniqueFd fd, ConnectTo(relay->address));
      return EchoExchange(fd.get(), 50 + static_cast<uint64_t>(i), 4 * kMiB);
    }));
  }
  for (auto& r : results) EXPECT_OK(r.get());
}

// A unix broker that does not accept yet and has a tiny backlog: its connect() says EAGAIN, the
// relay tries again until the broker accepts.
TEST(RelayTest, BrokerSlowToAcceptIsRetried) {
  TempDir dir;
  std::string path = dir.path() + "/broker.sock";
  auto listener = ListenUnix(path, /*backlog=*/1);
  ASSERT_OK(listener);
  auto relay = StartRelay(BrokerAddress::Unix(path));
  ASSERT_OK(relay);
  std::vector<std::future<Status>> results;
  for (int i = 0; i < 6; ++i) {
    results.push_back(std::async(std::launch::async, [&, i]() -> Status {
      ASSIGN_OR_RETURN(UniqueFd fd, ConnectTo(relay->address));
      return EchoExchange(fd.get(), 70 + static_cast<uint64_t>(i), 64 * 1024);
    }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto broker = TestBroker::Start(std::move(*listener), EchoHandler);
  ASSERT_OK(broker);
  for (auto& r : results) EXPECT_OK(r.get());
  EXPECT_EQ(relay->relay->stats().connections_failed, 0u);
}

TEST(RelayTest, ConnectTimeoutCountsAsDown) {
  TempDir dir;
  std::string path = dir.path() + "/broker.sock";
  auto listener = ListenUnix(path, /*backlog=*/0);  // never accepts
  ASSERT_OK(listener);
  RelayOptions options;
  options.connect_timeout = std::chrono::milliseconds(200);
  auto relay = StartRelay(BrokerAddress::Unix(path), options);
  ASSERT_OK(relay);
  std::vector<UniqueFd> clients;
  for (int i = 0; i < 4; ++i) {
    auto fd = ConnectTo(relay->address);
    ASSERT_OK(fd);
    clients.push_back(std::move(*fd));
  }
  // The first one or two fit the backlog and stay connected; the rest time out.
  EXPECT_TRUE(WaitFor([&] { return relay->relay->stats().connections_failed >= 2; },
                      std::chrono::seconds(3)));
  auto got = ReadToEof(clients.back().get(), std::chrono::seconds(2));
  if (!got.ok()) {
    EXPECT_THAT(got, StatusHasMessage("Connection reset"));
  }
}

// A broker that resets its connection: the client's is closed too (a reset) and nothing leaks.
TEST(RelayTest, BrokerResetClosesBothSides) {
  auto broker = StartBroker(TargetKind::kTcp, "", [](int fd) {
    char buf[16];
    ssize_t n = ::read(fd, buf, sizeof(buf));
    (void)n;
    linger l{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  });
  ASSERT_OK(broker);
  auto relay = StartRelay(broker->address);
  ASSERT_OK(relay);
  auto fd = ConnectTo(relay->address);
  ASSERT_OK(fd);
  ASSERT_OK(WriteAll(fd->get(), "ping"));
  auto got = ReadToEof(fd->get(), std::chrono::seconds(2));
  EXPECT_THAT(got, StatusHasMessage("Connection reset"));
  EXPECT_TRUE(WaitFor([&] { return Idle(*relay->relay); }));
}

// A client that half-closed and then resets, while the broker is silent: the relay notices the
// reset at once (no pending write would reveal it) and closes the broker's side.
TEST(RelayTest, ClientResetAfterHalfCloseClosesTheBrokerSide) {
  TempDir dir;
  std::promise<void> got_eof;
  std::promise<bool> got_hangup;
  auto broker = StartBroker(TargetKind::kUnix, dir.path(), [&](int fd) {
    auto request = ReadToEof(fd);
    got_eof.set_value();
    pollfd p{fd, 0, 0};  // POLLHUP is always reported
    bool hup = ::poll(&p, 1, 3000) == 1 && (p.revents & POLLHUP);
    got_hangup.set_value(hup);
  });
  ASSERT_OK(broker);
  auto relay = StartRelay(broker->address);
  ASSERT_OK(relay);
  auto fd = ConnectTo(relay->address);
  ASSERT_OK(fd);
  ASSERT_OK(WriteAll(fd->get(), "request"));
  ASSERT_EQ(::shutdown(fd->get(), SHUT_WR), 0);
  ASSERT_EQ(got_eof.get_future().wait_for(std::chrono::seconds(2)), std::future_status::ready);
  linger l{1, 0};
  ::setsockopt(fd->get(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  fd->reset();  // RST
  auto hangup = got_hangup.get_future();
  ASSERT_EQ(hangup.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  EXPECT_TRUE(hangup.get());
  EXPECT_TRUE(WaitFor([&] { return Idle(*relay->relay); }));
}

// ---------------------------------------------------------------------------------------------
// Limits, stop, descriptors, stats.

TEST(RelayTest, ConnectionsOverTheCapAreClosed) {
  TempDir dir;
  auto broker = StartBroker(TargetKind::kUnix, dir.path(), EchoHandler);
  ASSERT_OK(broker);
  RelayOptions options;
  options.max_connections = 3;
  auto relay = StartRelay(broker->address, options);
  ASSERT_OK(relay);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 3; ++i) {
    auto fd = ConnectTo(relay->address);
    ASSERT_OK(fd);
    ASSERT_OK(WriteAll(fd->get(), "x"));
    ASSERT_OK(ReadExactly(fd->get(), 1));
    held.push_back(std::move(*fd));
  }
  auto over = ConnectTo(relay->address);
  ASSERT_OK(over);
  auto got = ReadToEof(over->get(), std::chrono::seconds(2));
  if (got.ok()) {
    EXPECT_EQ(*got, "");
  }
  EXPECT_EQ(relay->relay->stats().connections_rejected, 1u);

  held.pop_back();  // closing one makes room
  ASSERT_TRUE(WaitFor([&] { return relay->relay->stats().active_connections == 2; }));
  auto again = ConnectTo(relay->address);
  ASSERT_OK(again);
  EXPECT_OK(EchoExchange(again->get(), 3, 1000));
}

// Stop with connections open and data in flight returns promptly and leaves no descriptor.
TEST(RelayTest, StopWithConnectionsOpenClosesEverything) {
  int fds_before = CountOpenFds();
  {
    TempDir dir;
    // A broker that never reads: the relay's pipes and the sockets' buffers fill up.
    auto broker = StartBroker(TargetKind::kUnix, dir.path(), [](int fd) {
      pollfd p{fd, POLLRDHUP, 0};
      while (::poll(&p, 1, -1) >= 0 && !(p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      }
    });
    ASSERT_OK(broker);
    auto relay = StartRelay(broker->address);
    ASSERT_OK(relay);
    std::vector<UniqueFd> clients;
    std::string chunk(256 * 1024, 'z');
    for (int i = 0; i < 20; ++i) {
      auto fd = ConnectTo(relay->address);
      ASSERT_OK(fd);
      ::send(fd->get(), chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      clients.push_back(std::move(*fd));
    }
    ASSERT_TRUE(WaitFor([&] { return broker->server->accepted() == 20; }));
    ASSERT_TRUE(WaitFor([&] { return relay->relay->stats().bytes_to_target > 0; }));

    auto start = Clock::now();
    relay->relay->Stop();
    auto elapsed = Clock::now() - start;
    EXPECT_LT(elapsed, std::chrono::milliseconds(500));
    EXPECT_EQ(relay->relay->stats().active_connections, 0u);
    for (auto& c : clients) {
      auto got = ReadToEof(c.get(), std::chrono::seconds(2));
      if (!got.ok()) {
        EXPECT_THAT(got, StatusHasMessage("Connection reset"));
      }
    }
    // The listener is closed too: nothing answers any more.
    EXPECT_THAT(ConnectTo(relay->address), StatusHasMessage("Connection refused"));
    relay->relay->Stop();  // idempotent
  }
  // Closes finish on the relay's and the broker's threads: wait for the count to come back
  // (a leak never does).
  EXPECT_TRUE(WaitFor([&] { return CountOpenFds() == fds_before; }))
      << CountOpenFds() << " descriptors open, " << fds_before << " before";
}

TEST(RelayTest, DescriptorsStableAcrossThousandConnections) {
  TempDir dir;
  auto broker = StartBroker(TargetKind::kUnix, dir.path(), EchoHandler);
  ASSERT_OK(broker);
  auto relay = StartRelay(broker->address);
  ASSERT_OK(relay);
  auto settle = [&] {
    return WaitFor([&] { return Idle(*relay->relay) && broker->server->active() == 0; });
  };
  {
    auto fd = ConnectTo(relay->address);
    ASSERT_OK(fd);
    ASSERT_OK(EchoExchange(fd->get(), 0, 100));
  }
  ASSERT_TRUE(settle());
  int fds_before = CountOpenFds();
  for (int i = 1; i <= 1000; ++i) {
    auto fd = ConnectTo(relay->address);
    ASSERT_OK(fd);
    ASSERT_OK(EchoExchange(fd->get(), static_cast<uint64_t>(i), 1000));
  }
  ASSERT_TRUE(settle());
  // Closes finish on the relay's and the broker's threads: wait for the count to come back
  // (a leak never does).
  EXPECT_TRUE(WaitFor([&] { return CountOpenFds() == fds_before; }))
      << CountOpenFds() << " descriptors open, " << fds_before << " before";
  RelayStats s = relay->relay->stats();
  EXPECT_EQ(s.connections_accepted, 1001u);
  EXPECT_EQ(s.bytes_to_target, 1000u * 1000u + 100u);
  EXPECT_EQ(s.bytes_from_target, 1000u * 1000u + 100u);
}

TEST(RelayTest, StatsCountConnectionsAndBytesEachWay) {
  TempDir dir;
  auto broker = StartBroker(TargetKind::kTcp, dir.path(), [](int fd) {
    if (!ReadExactly(fd, 1000).ok()) return;
    WriteAll(fd, std::string(250000, 'r')).IgnoreError();
  });
  ASSERT_OK(broker);
  auto relay = StartRelay(broker->address);
  ASSERT_OK(relay);
  for (int i = 0; i < 3; ++i) {
    auto fd = ConnectTo(relay->address);
    ASSERT_OK(fd);
    ASSERT_OK(WriteAll(fd->get(), std::string(1000, 'q')));
    auto reply = ReadToEof(fd->get());
    ASSERT_OK(reply);
    EXPECT_EQ(reply->size(), 250000u);
  }
  ASSERT_TRUE(WaitFor([&] { return Idle(*relay->relay); }));
  RelayStats s = relay->relay->stats();
  EXPECT_EQ(s.connections_accepted, 3u);
  EXPECT_EQ(s.connections_failed, 0u);
  EXPECT_EQ(s.connections_rejected, 0u);
  EXPECT_EQ(s.bytes_to_target, 3000u);
  EXPECT_EQ(s.bytes_from_target, 750000u);
  EXPECT_EQ(s.active_connections, 0u);
}

TEST(RelayTest, RunsOnTheCallersThreadUntilStopped) {
  TempDir dir;
  auto broker = StartBroker(TargetKind::kUnix, dir.path(), EchoHandler);
  ASSERT_OK(broker);
  auto listener = ListenLoopbackTcp("127.0.0.1", 0);
  ASSERT_OK(listener);
  auto port = LocalPort(listener->get());
  ASSERT_OK(port);
  auto relay = Relay::Create(std::move(*listener), broker->address);
  ASSERT_OK(relay);
  Relay* r = relay->get();
  auto ran = std::async(std::launch::async, [r] { return r->Run(); });
  auto fd = ConnectTo(BrokerAddress::Tcp("127.0.0.1", *port));
  ASSERT_OK(fd);
  EXPECT_OK(EchoExchange(fd->get(), 5, 500000));
  EXPECT_THAT(r->Start(), StatusIs(StatusCode::kFailedPrecondition));
  r->Stop();
  ASSERT_EQ(ran.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  EXPECT_OK(ran.get());
}

TEST(RelayTest, StopBeforeStartClosesTheListener) {
  int fds_before = CountOpenFds();
  {
    auto listener = ListenLoopbackTcp("127.0.0.1", 0);
    ASSERT_OK(listener);
    auto relay = Relay::Create(std::move(*listener), BrokerAddress::Unix("/nonexistent"));
    ASSERT_OK(relay);
    (*relay)->Stop();
    EXPECT_THAT((*relay)->Start(), StatusIs(StatusCode::kFailedPrecondition));
  }
  // Closes finish on the relay's and the broker's threads: wait for the count to come back
  // (a leak never does).
  EXPECT_TRUE(WaitFor([&] { return CountOpenFds() == fds_before; }))
      << CountOpenFds() << " descriptors open, " << fds_before << " before";
}

TEST(RelayTest, CreateRefusesBadArguments) {
  EXPECT_THAT(Relay::Create(std::vector<UniqueFd>{}, BrokerAddress::Unix("/x")),
              StatusIs(StatusCode::kInvalidArgument));
  auto listener = ListenLoopbackTcp("127.0.0.1", 0);
  ASSERT_OK(listener);
  EXPECT_THAT(Relay::Create(std::move(*listener), BrokerAddress::Tcp("192.0.2.1", 80)),
              StatusHasMessage("not a loopback address"));
}

}  // namespace
}  // namespace codespace
