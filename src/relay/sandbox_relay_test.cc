#include "relay/sandbox_relay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "base/process.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "relay/broker_bridge.h"
#include "relay/relay_test_util.h"

namespace codespace {
namespace {

using relay_testing::ConnectTo;
using relay_testing::EchoExchange;
using relay_testing::EchoHandler;
using relay_testing::PickFreePort;
using relay_testing::ReadToEof;
using relay_testing::TestBroker;
using relay_testing::WaitFor;

constexpr char kHelper[] = SANDBOX_RELAY_TEST_HELPER;

// Reads what the relay writes to its ready pipe, until EOF or 5 s.
std::string ReadReady(int fd) {
  auto got = ReadToEof(fd, std::chrono::seconds(5));
  return got.ok() ? *got : "<" + got.status().ToString() + ">";
}

struct Chain {
  TempDir dir;
  std::unique_ptr<TestBroker> broker;
  std::unique_ptr<BrokerBridge> bridge;
  std::string socket_path;
};

Status StartChain(Chain& c) {
  std::string broker_path = c.dir.path() + "/broker.sock";
  ASSIGN_OR_RETURN(UniqueFd listener, ListenUnix(broker_path));
  ASSIGN_OR_RETURN(c.broker, TestBroker::Start(std::move(listener), EchoHandler));
  c.socket_path = c.dir.path() + "/run.broker.sock";
  ASSIGN_OR_RETURN(c.bridge, BrokerBridge::Start(c.socket_path, BrokerAddress::Unix(broker_path)));
  return OkStatus();
}

// As codespace-init will: a child runs the relay; the parent waits for the ready byte; the
// relay serves on 127.0.0.1 (and [::1]) until SIGTERM.
TEST(SandboxRelayTest, ReportsReadyServesAndEndsOnSigterm) {
  Chain chain;
  ASSERT_OK(StartChain(chain));
  auto port = PickFreePort();
  ASSERT_OK(port);
  auto ready = MakePipe();
  ASSERT_OK(ready);
  SpawnOptions o;
  o.argv = {kHelper, std::to_string(*port), chain.socket_path, "3"};
  o.fds = {{ready->write.get(), 3}, {2, 2}};
  auto child = Spawn(o);
  ASSERT_OK(child);
  ready->write.reset();
  EXPECT_EQ(ReadReady(ready->read.get()), "R");

  auto fd = ConnectTo(BrokerAddress::Tcp("127.0.0.1", *port));
  ASSERT_OK(fd);
  EXPECT_OK(EchoExchange(fd->get(), 31, 8 * 1024 * 1024));
  auto v6 = ConnectTo(BrokerAddress::Tcp("::1", *port));
  if (v6.ok()) {
    EXPECT_OK(EchoExchange(v6->get(), 32, 1000));
  } else {
    std::printf("[ note ] no [::1] here (%s): IPv6 listener not tested\n",
                v6.status().ToString().c_str());
  }
  uint64_t expected_connections = v6.ok() ? 2 : 1;
  ASSERT_TRUE(WaitFor([&] { return chain.bridge->stats().active_connections == 0; }));
  EXPECT_EQ(chain.bridge->stats().connections_accepted, expected_connections);

  ASSERT_OK(child->Signal(SIGTERM));
  auto ended = child->WaitFor(std::chrono::seconds(2));
  ASSERT_OK(ended);
  ASSERT_TRUE(ended->has_value()) << "the relay ignored SIGTERM";
  EXPECT_EQ(**ended, ExitStatus::Killed(SIGTERM));
  EXPECT_THAT(ConnectTo(BrokerAddress::Tcp("127.0.0.1", *port)),
              ::codespace::testing::StatusHasMessage("Connection refused"));
}

// Port 0: the kernel picks, and the ready report says which.
TEST(SandboxRelayTest, PortZeroReportsTheChosenPort) {
  Chain chain;
  ASSERT_OK(StartChain(chain));
  auto ready = MakePipe();
  ASSERT_OK(ready);
  SpawnOptions o;
  o.argv = {kHelper, "0", chain.socket_path, "3"};
  o.fds = {{ready->write.get(), 3}, {2, 2}};
  auto child = Spawn(o);
  ASSERT_OK(child);
  ready->write.reset();
  std::string report = ReadReady(ready->read.get());
  ASSERT_GE(report.size(), 3u) << report;
  EXPECT_EQ(report[0], 'R');
  EXPECT_EQ(report.back(), '\n');
  int port = std::atoi(report.c_str() + 1);
  ASSERT_GT(port, 0) << report;
  auto fd = ConnectTo(BrokerAddress::Tcp("127.0.0.1", static_cast<uint16_t>(port)));
  ASSERT_OK(fd);
  EXPECT_OK(EchoExchange(fd->get(), 33, 100000));
}

// The relay keeps none of the descriptors it inherits (the init's status pipe, the run's output
// pipes) once it is ready: their readers see EOF when their real writers are done.
TEST(SandboxRelayTest, HoldsNoInheritedDescriptors) {
  Chain chain;
  ASSERT_OK(StartChain(chain));
  auto port = PickFreePort();
  ASSERT_OK(port);
  auto ready = MakePipe();
  auto status = MakePipe();
  auto output = MakePipe();
  ASSERT_OK(ready);
  ASSERT_OK(status);
  ASSERT_OK(output);
  SpawnOptions o;
  o.argv = {kHelper, std::to_string(*port), chain.socket_path, "3"};
  o.fds = {{ready->write.get(), 3},
           {status->write.get(), 5},
           {output->write.get(), 1},
           {output->write.get(), 2}};
  auto child = Spawn(o);
  ASSERT_OK(child);
  ready->write.reset();
  status->write.reset();
  output->write.reset();
  EXPECT_EQ(ReadReady(ready->read.get()), "R");
  auto status_end = ReadToEof(status->read.get(), std::chrono::seconds(2));
  EXPECT_OK(status_end) << "the relay still holds the status pipe";
  auto output_end = ReadToEof(output->read.get(), std::chrono::seconds(2));
  ASSERT_OK(output_end) << "the relay still holds the output pipe";
  EXPECT_EQ(*output_end, "");
  auto fd = ConnectTo(BrokerAddress::Tcp("127.0.0.1", *port));
  ASSERT_OK(fd);
  EXPECT_OK(EchoExchange(fd->get(), 34, 1000));
}

// A relay that cannot listen says why on the ready pipe (and stderr), and exits 1.
TEST(SandboxRelayTest, FailureToListenIsReported) {
  auto taken = ListenLoopbackTcp("127.0.0.1", 0);
  ASSERT_OK(taken);
  auto port = LocalPort(taken->get());
  ASSERT_OK(port);
  auto ready = MakePipe();
  ASSERT_OK(ready);
  SpawnOptions o;
  o.argv = {kHelper, std::to_string(*port), "/nonexistent.sock", "3"};
  o.fds = {{ready->write.get(), 3}};
  auto child = Spawn(o);
  ASSERT_OK(child);
  ready->write.reset();
  std::string report = ReadReady(ready->read.get());
  EXPECT_EQ(report.rfind("error: ", 0), 0u) << report;
  EXPECT_THAT(report, ::testing::HasSubstr("bind(127.0.0.1:" + std::to_string(*port) +
                                           "): Address already in use"));
  auto ended = child->Wait();
  ASSERT_OK(ended);
  EXPECT_EQ(*ended, ExitStatus::Exited(1));
}

// The relay ends with its parent (the sandbox's init), however that one dies.
TEST(SandboxRelayTest, DiesWithItsParent) {
  TempDir dir;
  auto port = PickFreePort();
  ASSERT_OK(port);
  auto out = MakePipe();
  ASSERT_OK(out);
  SpawnOptions o;
  // The shell stands for codespace-init: it starts the relay, then becomes `sleep` (same pid).
  o.argv = {"/bin/sh", "-c",
            std::string(kHelper) + " " + std::to_string(*port) + " " + dir.path() +
                "/none.sock -1 & echo $!; exec sleep 30"};
  o.fds = {{out->write.get(), 1}, {2, 2}};
  auto parent = Spawn(o);
  ASSERT_OK(parent);
  out->write.reset();
  std::string line;
  char c;
  while (::read(out->read.get(), &c, 1) == 1 && c != '\n') line += c;
  pid_t relay_pid = std::atoi(line.c_str());
  ASSERT_GT(relay_pid, 0) << line;
  ASSERT_TRUE(WaitFor([&] { return ConnectTo(BrokerAddress::Tcp("127.0.0.1", *port)).ok(); }));

  ASSERT_OK(parent->Signal(SIGKILL));
  ASSERT_OK(parent->Wait());
  auto gone = [&] {
    if (::kill(relay_pid, 0) != 0) return true;
    std::ifstream stat("/proc/" + std::to_string(relay_pid) + "/stat");
    std::string pid, comm, state;
    stat >> pid >> comm >> state;
    return state == "Z";  // dead, waiting for whoever adopted it to reap it
  };
  EXPECT_TRUE(WaitFor(gone, std::chrono::seconds(3)));
  EXPECT_FALSE(ConnectTo(BrokerAddress::Tcp("127.0.0.1", *port)).ok());
}

}  // namespace
}  // namespace codespace
