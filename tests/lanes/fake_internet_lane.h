// The fixture the filtered lanes share: a root install, and the fake internet (its worker host
// with IPv6 forwarding on unless asked not to, so that runs get IPv6 too; codespace turns IPv4
// on itself).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "harness/fake_internet.h"
#include "lanes/lane_test_util.h"
#include "net/filtered_netns.h"

namespace codespace::lanes {

// Removes a run's named network namespace and its run directory under /run/codespace at scope
// exit, whether or not the code under test did (a test that plants one and fails before the
// sweep it tests removes it must still leave the machine clean). Its veth and table live in the
// fake internet's worker host and go with it.
class NetnsCleanup {
 public:
  explicit NetnsCleanup(std::string name) : name_(std::move(name)) {}
  ~NetnsCleanup() { FilteredEgressNetns::TearDownNamespaceByName(name_).IgnoreError(); }
  NetnsCleanup(const NetnsCleanup&) = delete;
  NetnsCleanup& operator=(const NetnsCleanup&) = delete;

 private:
  std::string name_;
};

class FakeInternetLaneTest : public ::testing::Test {
 protected:
  // `worker_host_ipv6_forwarding` false: the worker host keeps the kernel's default (off), for
  // fixtures whose tests set forwarding themselves.
  explicit FakeInternetLaneTest(bool worker_host_ipv6_forwarding = true)
      : worker_host_ipv6_forwarding_(worker_host_ipv6_forwarding) {}
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
    auto net = FakeInternet::Create();
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    net_ = std::move(*net);
    if (worker_host_ipv6_forwarding_) {
      ASSERT_TRUE(net_->SetWorkerHostForwarding(true).ok());
    }
  }
  // A filtered run's supervisor tears its network down after the run is recorded: let it
  // finish before the fake internet goes.
  void TearDown() override { install_.WaitForSupervisors(); }

  StagedInstall install_{0};
  std::unique_ptr<FakeInternet> net_;

 private:
  const bool worker_host_ipv6_forwarding_;
};

}  // namespace codespace::lanes
