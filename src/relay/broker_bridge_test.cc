#include "relay/broker_bridge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "relay/relay_test_util.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;
using relay_testing::ConnectTo;
using relay_testing::EchoExchange;
using relay_testing::EchoHandler;
using relay_testing::TestBroker;
using relay_testing::WaitFor;
using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = 1024 * 1024;

struct EchoBroker {
  std::unique_ptr<TestBroker> server;
  BrokerAddress address;
};

Result<EchoBroker> StartTcpEchoBroker() {
  ASSIGN_OR_RETURN(UniqueFd listener, ListenLoopbackTcp("127.0.0.1", 0));
  ASSIGN_OR_RETURN(uint16_t port, LocalPort(listener.get()));
  EchoBroker b;
  b.address = BrokerAddress::Tcp("127.0.0.1", port);
  ASSIGN_OR_RETURN(b.server, TestBroker::Start(std::move(listener), EchoHandler));
  return b;
}

TEST(BrokerBridgeTest, SocketIsWorldWritableAndRemovedOnStop) {
  TempDir dir;
  auto broker = StartTcpEchoBroker();
  ASSERT_OK(broker);
  std::string path = dir.path() + "/run-1.broker.sock";
  auto bridge = BrokerBridge::Start(path, broker->address);
  ASSERT_OK(bridge);
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0666u);

  auto fd = ConnectTo(BrokerAddress::Unix(path));
  ASSERT_OK(fd);
  EXPECT_OK(EchoExchange(fd->get(), 11, 1 * kMiB));
  (*bridge)->Stop();
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  (*bridge)->Stop();  // idempotent
  RelayStats s = (*bridge)->stats();
  EXPECT_EQ(s.connections_accepted, 1u);
  EXPECT_EQ(s.bytes_to_target, 1 * kMiB);
  EXPECT_EQ(s.bytes_from_target, 1 * kMiB);
}

TEST(BrokerBridgeTest, DestructorRemovesTheSocket) {
  TempDir dir;
  std::string path = dir.path() + "/b.sock";
  {
    auto bridge = BrokerBridge::Start(path, BrokerAddress::Unix(dir.path() + "/nothing.sock"));
    ASSERT_OK(bridge);
    EXPECT_EQ(::access(path.c_str(), F_OK), 0);
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST(BrokerBridgeTest, ReplacesAStaleSocketFile) {
  TempDir dir;
  std::string path = dir.path() + "/b.sock";
  {
    auto stale = ListenUnix(path);  // a crashed worker's socket: the file outlives the fd
    ASSERT_OK(stale);
  }
  auto broker = StartTcpEchoBroker();
  ASSERT_OK(broker);
  auto bridge = BrokerBridge::Start(path, broker->address);
  ASSERT_OK(bridge);
  auto fd = ConnectTo(BrokerAddress::Unix(path));
  ASSERT_OK(fd);
  EXPECT_OK(EchoExchange(fd->get(), 12, 1000));
}

TEST(BrokerBridgeTest, RefusesToReplaceSomethingElse) {
  TempDir dir;
  std::string path = dir.path() + "/b.sock";
  std::ofstream(path) << "not a socket";
  auto bridge = BrokerBridge::Start(path, BrokerAddress::Unix("/run/broker.sock"));
  EXPECT_THAT(bridge, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(bridge, StatusHasMessage("is not a socket"));
  EXPECT_EQ(::access(path.c_str(), F_OK), 0);
}

TEST(BrokerBridgeTest, RefusesANonLoopbackBrokerAndCreatesNothing) {
  TempDir dir;
  std::string path = dir.path() + "/b.sock";
  auto bridge = BrokerBridge::Start(path, BrokerAddress::Tcp("198.51.100.7", 443));
  EXPECT_THAT(bridge, StatusHasMessage("not a loopback address"));
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST(BrokerBridgeTest, EachRunCountsItsOwnTraffic) {
  TempDir dir;
  auto broker = StartTcpEchoBroker();
  ASSERT_OK(broker);
  auto a = BrokerBridge::Start(dir.path() + "/a.sock", broker->address);
  auto b = BrokerBridge::Start(dir.path() + "/b.sock", broker->address);
  ASSERT_OK(a);
  ASSERT_OK(b);
  for (int i = 0; i < 2; ++i) {
    auto fd = ConnectTo(BrokerAddress::Unix(dir.path() + "/a.sock"));
    ASSERT_OK(fd);
    ASSERT_OK(EchoExchange(fd->get(), 20, 3000));
  }
  auto fd = ConnectTo(BrokerAddress::Unix(dir.path() + "/b.sock"));
  ASSERT_OK(fd);
  ASSERT_OK(EchoExchange(fd->get(), 21, 5000));
  ASSERT_TRUE(WaitFor([&] {
    return (*a)->stats().active_connections == 0 && (*b)->stats().active_connections == 0;
  }));
  EXPECT_EQ((*a)->stats().connections_accepted, 2u);
  EXPECT_EQ((*a)->stats().bytes_to_target, 6000u);
  EXPECT_EQ((*a)->stats().bytes_from_target, 6000u);
  EXPECT_EQ((*b)->stats().connections_accepted, 1u);
  EXPECT_EQ((*b)->stats().bytes_to_target, 5000u);
}

// The whole path of a brokered run, in one process: a TCP listener (the in-sandbox half) →
// the bridge's unix socket → the bridge → a TCP echo broker. 256 MiB each way, byte for byte.
TEST(BrokerBridgeTest, LargeTransferThroughBothHalves) {
  TempDir dir;
  auto broker = StartTcpEchoBroker();
  ASSERT_OK(broker);
  std::string socket_path = dir.path() + "/run.broker.sock";
  auto bridge = BrokerBridge::Start(socket_path, broker->address);
  ASSERT_OK(bridge);
  auto listener = ListenLoopbackTcp("127.0.0.1", 0);
  ASSERT_OK(listener);
  auto port = LocalPort(listener->get());
  ASSERT_OK(port);
  auto in_sandbox = Relay::Create(std::move(*listener), BrokerAddress::Unix(socket_path));
  ASSERT_OK(in_sandbox);
  ASSERT_OK((*in_sandbox)->Start());

  constexpr size_t kBytes = 256 * kMiB;
  auto fd = ConnectTo(BrokerAddress::Tcp("127.0.0.1", *port));
  ASSERT_OK(fd);
  auto start = Clock::now();
  ASSERT_OK(EchoExchange(fd->get(), 256, kBytes, std::chrono::seconds(60)));
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "[ throughput ] TCP -> relay -> unix -> bridge -> TCP echo: %zu MiB each way in %.2f s: "
      "%.0f MiB/s each way (both directions at once, generation and checking included)\n",
      kBytes / kMiB, seconds, static_cast<double>(kBytes / kMiB) / seconds);

  ASSERT_TRUE(WaitFor([&] { return (*bridge)->stats().active_connections == 0; }));
  RelayStats s = (*bridge)->stats();
  EXPECT_EQ(s.connections_accepted, 1u);
  EXPECT_EQ(s.bytes_to_target, kBytes);
  EXPECT_EQ(s.bytes_from_target, kBytes);
  EXPECT_EQ((*in_sandbox)->stats().bytes_to_target, kBytes);
}

}  // namespace
}  // namespace codespace
