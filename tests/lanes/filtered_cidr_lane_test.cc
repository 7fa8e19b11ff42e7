// The blocked sets, end to end: a filtered run whose allowlist is every address (0.0.0.0/0 and
// ::/0) still reaches neither the cloud metadata addresses nor the worker's own addresses (its
// uplink, and its side of the run's veth). SPEC: "the worker's own addresses and the metadata
// addresses 169.254.169.254 / fd00:ec2::254 unreachable unless listed by address" — a CIDR that
// covers them is not listing them. The ruleset's text is pinned by nft_ruleset_test; this is the
// same wall seen from inside a run of the real binary, against the fake internet.
#include <fmt/format.h>

#include "harness/fake_internet.h"
#include "lanes/fake_internet_lane.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class FilteredCidrLaneTest : public FakeInternetLaneTest {
 protected:
  // A filtered run allowing every address, as a root worker in the worker host; `script` runs
  // under /bin/sh with $0 = escape_probe.
  CliResult RunEverywhere(const std::string& script) {
    return RunCodespace(
        install_,
        {"run", "--workspace", install_.workspace(), "--egress", "allowlist", "--allow",
         "0.0.0.0/0", "--allow", "::/0", "--", "/bin/sh", "-c", script, install_.probe()},
        {{"CODESPACE_DNS_UPSTREAM", kDnsServerV4}},
        net_->WorkerHostArgv({}, WorkerResolvConf::kHost));
  }
};

TEST_F(FilteredCidrLaneTest, CidrCoveringEverythingOpensNeitherMetadataNorTheWorker) {
  // Positive control: the CIDRs are in force (these addresses are listed by nothing else).
  CliResult open = RunEverywhere(
      fmt::format("\"$0\" connect {} 80 && \"$0\" connect {} 80", kWildV4, kAllowedV6));
  ASSERT_EQ(open.code(), 0) << "the allow-everything CIDRs do not work: " << Describe(open);
  EXPECT_EQ(LatestRecord(install_)["network"], "filtered");

  // Each wall probed at once (each probe waits up to 3 s); a reached one prints REACHED.
  const std::string targets =
      fmt::format("{0}:80 {1}:80 {2}:{4} {3}:{4} $(\"$0\" gateway):{4}", kMetadataV4, kMetadataV6,
                  kWorkerUplinkV4, kWorkerUplinkV6, kWorkerServicePort);
  CliResult r =
      RunEverywhere("for t in " + targets +
                    "; do ( a=${t%:*}; p=${t##*:}; \"$0\" no-connect \"$a\" \"$p\" >/dev/null || "
                    "echo \"REACHED $a port $p\" ) & done; wait; echo probed");
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("probed"));
  EXPECT_THAT(r.output, Not(HasSubstr("REACHED"))) << Describe(r);
  EXPECT_EQ(net_->ContactsAt(kMetadataV4, 80), 0);
  EXPECT_EQ(net_->ContactsAt(kMetadataV6, 80), 0);
  EXPECT_GT(LatestRecord(install_)["network_report"]["dropped_packets"].get<uint64_t>(), 0u);
}

}  // namespace
}  // namespace codespace::lanes
