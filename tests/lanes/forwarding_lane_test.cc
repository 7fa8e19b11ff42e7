// Read-only forwarding lane. procps' `sysctl -w` warns and exits 0 where ip_forward cannot be
// written; the probe never trusts it (nor writes): it reads the file and checks access(W_OK).
//
// Two stagings, both in namespaces of the test's own (the host's ip_forward is never touched:
// 0 is written inside a fresh network namespace that dies with the lane's command):
//
//  * A root worker for which /proc/sys is read-only, in a private mount namespace, where
//    bubblewrap still confines: uid 0 of a user namespace mapped to uid 1654 (a rootless
//    container's root) in a network namespace owned by the host's user namespace, so ip_forward
//    reads 0 and is not writable by it. canFilter=no names forwarding; an allowlist run is
//    severed, and the allowlisted service stays unreachable.
//
//  * /proc/sys bound read-only over itself (a container's masked /proc). The kernel then refuses
//    bubblewrap a fresh /proc in its user namespace (an over-mounted proc is not "fully
//    visible"), so this host does not confine: the allowlist run is planned on the tools alone,
//    and is aborted at setup or filtered — never launched on the worker's network.
#include <fmt/format.h>

#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;

constexpr int kServicePort = 18080;

// Runs its arguments in a fresh network namespace with lo up, ip_forward 0, and a listener on
// 127.0.0.1:kServicePort (the worker's loopback service); $0 is escape_probe.
constexpr const char* kNetnsScript =
    "set -e; ip link set lo up; echo 0 > /proc/sys/net/ipv4/ip_forward; "
    "\"$0\" listen {port} 60 & L=$!; sleep 0.2; set +e; \"$@\"; rc=$?; kill $L; exit $rc";

class ForwardingLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    ASSERT_TRUE(install_.ok()) << install_.error();
  }
  std::vector<std::string> InNetns(std::vector<std::string> inner) const {
    std::vector<std::string> w = {
        "/usr/bin/unshare", "--net", "--", "/bin/sh", "-c",
        fmt::format(fmt::runtime(kNetnsScript), fmt::arg("port", kServicePort)),
        install_.probe()};
    w.insert(w.end(), inner.begin(), inner.end());
    return w;
  }
  // Root of a user namespace mapped to uid 1654, in a private mount namespace.
  std::vector<std::string> RootlessRoot() const {
    return InNetns({"/usr/bin/setpriv", "--reuid=1654", "--regid=1654", "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--", "/usr/bin/unshare", "--user",
                    "--map-root-user", "--mount", "--propagation", "private", "--"});
  }
  // /proc/sys bound read-only over itself in a private mount namespace, then the worker as
  // uid 1654 (the install's owner, so its records stay readable to the lane).
  std::vector<std::string> ReadOnlyProcSys() const {
    return InNetns({"/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh",
                    "-c",
                    "set -e; mount --bind /proc/sys /proc/sys; "
                    "mount -o remount,bind,ro /proc/sys; exec /usr/bin/setpriv --reuid=1654 "
                    "--regid=1654 --clear-groups --inh-caps=-all --bounding-set=-all -- \"$@\"",
                    "sh"});
  }
  CliResult Run(const std::vector<std::string>& wrapper, const std::vector<std::string>& flags,
                const std::vector<std::string>& cmd) {
    std::vector<std::string> a = {"run", "--workspace", install_.workspace()};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return RunCodespaceAs(install_, 0, a, {}, wrapper);
  }
  // The install is owned by 1654, so that the rootless root (uid 1654 outside) can use it.
  StagedInstall install_{kUnprivilegedUid};
  std::string port_ = std::to_string(kServicePort);
  std::vector<std::string> allow_ = {"--egress", "allowlist", "--allow", "127.0.0.1:" + port_};
};

TEST_F(ForwardingLaneTest, RootWithReadOnlyForwardingPostureNamesForwarding) {
  CliResult r = RunCodespaceAs(install_, 0, {"posture"}, {}, RootlessRoot());
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("posture uid=0 confines=yes"));
  EXPECT_THAT(r.output, HasSubstr("tools=yes canFilter=no"));
  EXPECT_THAT(r.output, HasSubstr("filterUnavailable=\"IPv4 forwarding is off"));
  EXPECT_THAT(r.output, HasSubstr("reads \\\"0\\\""));
  EXPECT_THAT(r.output, HasSubstr("allowlist=severed"));
}

TEST_F(ForwardingLaneTest, RootWithReadOnlyForwardingSeversAnAllowlistRun) {
  // Positive control: the service answers a shared run in this namespace.
  CliResult open =
      Run(RootlessRoot(), {"--egress", "open"}, {install_.probe(), "connect", "127.0.0.1", port_});
  ASSERT_EQ(open.code(), 0) << Describe(open);

  CliResult r = Run(RootlessRoot(), allow_, {install_.probe(), "no-connect", "127.0.0.1", port_});
  EXPECT_EQ(r.code(), 0) << "the allowlisted service was reachable: " << Describe(r);
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["plan"], "severed") << rec.dump();
  EXPECT_EQ(rec["network"], "severed");
  EXPECT_EQ(rec["state"], "exited");
  EXPECT_THAT(rec["reason"].get<std::string>(), HasSubstr("IPv4 forwarding is off"));
}

TEST_F(ForwardingLaneTest, ReadOnlyProcSysOverMountUnconfinesAndTheRunNeverSharesTheNetwork) {
  CliResult posture = RunCodespaceAs(install_, 0, {"posture"}, {}, ReadOnlyProcSys());
  EXPECT_EQ(posture.code(), 0) << Describe(posture);
  EXPECT_THAT(posture.output, HasSubstr("confines=no"));
  EXPECT_THAT(posture.output, HasSubstr("Can't mount proc"));
  EXPECT_THAT(posture.output, HasSubstr("allowlist=filtered-or-aborted"));

  std::string created = install_.workspace() + "/command-ran";
  CliResult r = Run(ReadOnlyProcSys(), allow_, {"/bin/touch", created});
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["plan"], "filtered") << rec.dump();
  EXPECT_EQ(rec["state"], "aborted") << Describe(r);
  EXPECT_EQ(r.code(), 125);
  EXPECT_NE(::access(created.c_str(), F_OK), 0) << "the command ran";
}

}  // namespace
}  // namespace codespace::lanes
