// FilteredEgressNetns against the real kernel (root only). Each test runs the worker's side in
// a network namespace of its own ("worker"), so nothing of the host — addresses, ip_forward,
// nftables — is touched; both namespaces are removed when the test ends, pass or fail.
#include "net/filtered_netns.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "net/netns.h"
#include "net/nft_ruleset.h"
#include "net/nftables.h"
#include "net/rtnetlink.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::testing::HasSubstr;
using ::testing::Not;

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

class FilteredNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: creates network namespaces";
    worker_name_ = "cstw-" + std::to_string(::getpid());
    DeleteNamedNetns(worker_name_).IgnoreError();
    auto fd = CreateNamedNetns(worker_name_);
    ASSERT_OK(fd);
    worker_fd_ = std::move(*fd);
  }
  void TearDown() override {
    if (worker_fd_) {
      FilteredEgressNetns::TearDownNamespaceByName(kName).IgnoreError();
      DeleteNamedNetns(worker_name_).IgnoreError();
    }
  }
  // Runs `fn` as the worker: on a thread inside the worker namespace.
  void AsWorker(const std::function<void()>& fn) {
    ASSERT_OK(RunInNetns(worker_fd_.get(), [&] {
      fn();
      return OkStatus();
    }));
  }
  FilteredNetnsConfig Config() {
    FilteredNetnsConfig c;
    c.run_id = kName.substr(3) + "0000";
    c.namespace_name = kName;
    c.allowlist = {*ParseAllowlistEntry("allowed.test"), *ParseAllowlistEntry("203.0.113.0/24")};
    c.upstream_dns = "127.0.0.1#5353";  // never asked in these tests
    return c;
  }
  // What the worker side and the host hold of the run, as words, for "nothing left" checks.
  std::string Leftovers() {
    std::string out;
    if (Exists(NetnsPath(kName))) out += "netns ";
    if (Exists(FilteredEgressNetns::RunDir(kName))) out += "rundir ";
    AsWorker([&] {
      auto rt = Rtnetlink::Open();
      if (rt.ok() && (*rt)->LinkIndex(FilteredEgressNetns::WorkerVethName(kName)).ok()) out += "veth ";
      auto nft = Nftables::Open();
      if (nft.ok()) {
        auto tables = (*nft)->Query("list tables");
        if (tables.ok() && tables->find("codespace_") != std::string::npos) out += "table ";
      }
    });
    return out;
  }

  // Per process: ctest runs test cases of this file in parallel.
  const std::string kName = fmt::format("cs-{:012x}", ::getpid());
  std::string worker_name_;
  UniqueFd worker_fd_;
};

TEST_F(FilteredNetnsTest, SetupBuildsEverythingAndTeardownRemovesIt) {
  AsWorker([&] {
    auto net = FilteredEgressNetns::Setup(Config());
    ASSERT_OK(net);
    const RunAddresses& a = (*net)->addresses();
    // Worker side: the veth with the slot's .1, forwarding on, the NAT table.
    auto rt = Rtnetlink::Open();
    ASSERT_OK(rt);
    auto idx = (*rt)->LinkIndex(FilteredEgressNetns::WorkerVethName(kName));
    ASSERT_OK(idx);
    bool has_worker_addr = false;
    auto worker_addrs = (*rt)->ListAddresses();
    ASSERT_OK(worker_addrs);
    for (const auto& ia : *worker_addrs) has_worker_addr |= ia.address == a.worker_v4;
    EXPECT_TRUE(has_worker_addr);
    EXPECT_EQ(*ReadFileToString("/proc/sys/net/ipv4/ip_forward"), "1\n");
    auto nft = Nftables::Open();
    ASSERT_OK(nft);
    EXPECT_THAT(*(*nft)->Query("list tables"), HasSubstr("table inet " + WorkerTableName(kName)));
    // Run side: eth0 with .2, the firewall table, and a resolv.conf naming the gate.
    ASSERT_OK(RunInNetns((*net)->netns_fd(), [&]() -> Status {
      ASSIGN_OR_RETURN(auto run_rt, Rtnetlink::Open());
      ASSIGN_OR_RETURN(auto addrs, run_rt->ListAddresses());
      bool has = false;
      for (const auto& ia : addrs) has |= ia.address == a.run_v4;
      if (!has) return InternalError("run address missing");
      ASSIGN_OR_RETURN(auto run_nft, Nftables::Open());
      ASSIGN_OR_RETURN(std::string ruleset, run_nft->Query("list ruleset"));
      if (ruleset.find("policy drop") == std::string::npos) return InternalError(ruleset);
      return OkStatus();
    }));
    EXPECT_EQ(*ReadFileToString((*net)->resolv_conf_path()),
              "nameserver " + a.worker_v4.ToString() + "\n");
    EXPECT_OK((*net)->Teardown());
    EXPECT_OK((*net)->Teardown());  // idempotent
  });
  EXPECT_EQ(Leftovers(), "");
}

// Every step can fail; each failure names its step and leaves nothing behind.
TEST_F(FilteredNetnsTest, FailureAtEachStepAbortsAndTearsDown) {
  for (SetupStep fail_at : kAllSetupSteps) {
    SCOPED_TRACE(std::string(SetupStepName(fail_at)));
    AsWorker([&] {
      FilteredNetnsConfig c = Config();
      c.before_step = [fail_at](SetupStep s) {
        return s == fail_at ? InternalError("injected failure") : OkStatus();
      };
      auto net = FilteredEgressNetns::Setup(c);
      ASSERT_FALSE(net.ok());
      EXPECT_EQ(net.status().message(),
                fmt::format("Filtered-egress netns setup failed: {}: injected failure",
                            SetupStepName(fail_at)));
    });
    EXPECT_EQ(Leftovers(), "");
  }
}

// The forwarding write is judged by reading it back: a file that stays 0 (bound read-only here,
// as /proc/sys is in a container) fails the step, whatever the write said.
TEST_F(FilteredNetnsTest, ForwardingThatStaysOffFailsTheStep) {
  TempDir dir;
  std::string fwd = dir.path() + "/ip_forward";
  ASSERT_OK(WriteFileAtomically(fwd, "0\n"));
  ASSERT_EQ(::mount(fwd.c_str(), fwd.c_str(), nullptr, MS_BIND, nullptr), 0);
  ASSERT_EQ(::mount(nullptr, fwd.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr), 0);
  AsWorker([&] {
    FilteredNetnsConfig c = Config();
    c.ipv4_forwarding_path = fwd;
    auto net = FilteredEgressNetns::Setup(c);
    EXPECT_THAT(net, StatusHasMessage("Filtered-egress netns setup failed: enable forwarding: " + fwd +
                                      " still reads \"0\" after writing 1"));
  });
  ::umount2(fwd.c_str(), MNT_DETACH);
  EXPECT_EQ(Leftovers(), "");
}

TEST_F(FilteredNetnsTest, TearDownByNameRemovesWhatACrashLeft) {
  std::unique_ptr<FilteredEgressNetns> net;
  AsWorker([&] {
    auto made = FilteredEgressNetns::Setup(Config());
    ASSERT_OK(made);
    net = std::move(*made);
    // The owner is gone (a crash): only the name is known.
    EXPECT_OK(FilteredEgressNetns::TearDownNamespaceByName(kName));
    EXPECT_OK(FilteredEgressNetns::TearDownNamespaceByName(kName));  // and again: idempotent
  });
  EXPECT_EQ(Leftovers(), "");
  net.reset();  // the late owner's teardown finds nothing and does not fail loudly
  EXPECT_EQ(Leftovers(), "");
}

TEST_F(FilteredNetnsTest, TakenNameIsRefusedAtCreateNamespace) {
  AsWorker([&] {
    auto first = FilteredEgressNetns::Setup(Config());
    ASSERT_OK(first);
    auto second = FilteredEgressNetns::Setup(Config());
    EXPECT_THAT(second, StatusHasMessage("Filtered-egress netns setup failed: create namespace"));
    // The failed second setup must not tear down the first's namespace by name.
    EXPECT_TRUE(Exists(NetnsPath(kName)));
  });
}

}  // namespace
}  // namespace codespace
