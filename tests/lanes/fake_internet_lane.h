// The fixture the filtered lanes share: a root install, and the fake internet (its worker host
// with IPv6 forwarding on, so that runs get IPv6 too; codespace turns IPv4 on itself).
#pragma once

#include <memory>

#include "harness/fake_internet.h"
#include "lanes/lane_test_util.h"

namespace codespace::lanes {

class FakeInternetLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
    auto net = FakeInternet::Create();
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    net_ = std::move(*net);
    ASSERT_TRUE(net_->SetWorkerHostForwarding(true).ok());
  }
  // A filtered run's supervisor tears its network down after the run is recorded: let it
  // finish before the fake internet goes.
  void TearDown() override { install_.WaitForSupervisors(); }

  StagedInstall install_{0};
  std::unique_ptr<FakeInternet> net_;
};

}  // namespace codespace::lanes
