// The syscall filter, end to end: seccomp_probe inside real runs — as root, as uid 1654 and
// unconfined (codespace-init loads the filter there) — must find every denied syscall denied
// with the table's errno and the non-native ABIs killed; outside, as a control, every one of
// those calls gets another answer. Then what must keep working under it: git, python3, gcc and
// make, npm install of a local tarball, and `ip addr` in a filtered run.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "base/file_util.h"
#include "base/testing/temp_dir.h"
#include "lanes/fake_internet_lane.h"
#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

const std::map<std::string, std::string> kNoBwrap = {
    {"CODESPACE_BWRAP_PATH", "/nonexistent/bwrap"}};

struct Lane {
  const char* name;
  uid_t uid;
  bool confined;
};

class SeccompLaneTest : public ::testing::TestWithParam<Lane> {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    install_ = std::make_unique<StagedInstall>(GetParam().uid);
    ASSERT_TRUE(install_->ok()) << install_->error();
  }
  std::map<std::string, std::string> Env() const {
    return GetParam().confined ? std::map<std::string, std::string>{} : kNoBwrap;
  }
  CliResult Run(const std::vector<std::string>& flags, const std::vector<std::string>& cmd) {
    std::vector<std::string> a = {"run", "-q", "--workspace", install_->workspace()};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    return RunCodespace(*install_, a, Env());
  }
  std::unique_ptr<StagedInstall> install_;
};

TEST_P(SeccompLaneTest, PostureSaysTheFilterIsBuilt) {
  CliResult r = RunCodespace(*install_, {"posture"}, Env());
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr(" seccomp=yes"));
  EXPECT_THAT(r.output, HasSubstr(GetParam().confined ? "confines=yes" : "confines=no"));
}

TEST_P(SeccompLaneTest, EveryDeniedSyscallIsDeniedAndTheOtherAbisKilled) {
  CliResult r = Run({}, {install_->seccomp_probe(), install_->workspace()});
  EXPECT_EQ(r.code(), 0) << "a wall fell (exit 10+N names check N): " << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("PASS int 0x80 (i386 getpid): got killed by signal 31"));
  EXPECT_THAT(r.output, HasSubstr("PASS x32 getpid: got killed by signal 31"));
  EXPECT_THAT(r.output, HasSubstr("PASS chmod(S_ISUID): got EPERM"));
  EXPECT_THAT(r.output, HasSubstr("PASS io_uring_setup: got ENOSYS"));
  EXPECT_THAT(r.output, Not(HasSubstr("FAIL")));
  auto rec = LatestRecord(*install_);
  EXPECT_EQ(rec["state"], "exited") << rec.dump();
  EXPECT_THAT(rec["seccomp"].get<std::string>(), ContainsRegex("^sha256:[0-9a-f]{64}$"));
  EXPECT_EQ(rec["spec"].count("allow_ptrace"), 0u) << "off is the default, and not written";
  // `codespace show` names the filter.
  CliResult show = RunCodespace(*install_, {"show", rec["id"].get<std::string>()}, Env());
  EXPECT_THAT(show.output, HasSubstr(rec["seccomp"].get<std::string>())) << Describe(show);
}

// The opt-in: ptrace and its kin work, nothing else opens, and the record says so.
TEST_P(SeccompLaneTest, AllowPtraceOpensPtraceAndNothingElse) {
  CliResult plain = Run({}, {"/bin/true"});
  ASSERT_EQ(plain.code(), 0) << Describe(plain);
  std::string plain_filter = LatestRecord(*install_)["seccomp"];
  CliResult r =
      Run({"--allow-ptrace"}, {install_->seccomp_probe(), "--allow-ptrace", install_->workspace()});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("PASS ptrace(PTRACE_TRACEME): got ok"));
  EXPECT_THAT(r.output, HasSubstr("PASS unshare: got EPERM"));
  auto rec = LatestRecord(*install_);
  EXPECT_EQ(rec["spec"]["allow_ptrace"], true) << rec.dump();
  EXPECT_NE(rec["seccomp"], plain_filter);
}

// The same probe, outside every filter, must see each denied call answered otherwise: each
// check above can fail.
TEST_P(SeccompLaneTest, ControlOutsideTheFilterEveryCheckCanFail) {
  if (!GetParam().confined || GetParam().uid != 0) GTEST_SKIP() << "one control, in the root lane";
  auto out = RunCommand({install_->seccomp_probe(), "--control", install_->workspace()});
  ASSERT_TRUE(out.ok()) << out.status().message();
  CliResult r{out->status, out->output};
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("PASS int 0x80 (i386 getpid): got ok"));
  EXPECT_THAT(r.output, HasSubstr("PASS chmod(S_ISUID): got ok"));
  EXPECT_THAT(r.output, HasSubstr("PASS ptrace(PTRACE_TRACEME): got ok"));
  EXPECT_THAT(r.output, Not(HasSubstr("FAIL")));
}

TEST_P(SeccompLaneTest, GitWorksUnderTheFilter) {
  CliResult r = Run({"--env", "HOME=" + install_->workspace()},
                    {"/bin/sh", "-c",
                     "set -e; rm -rf repo; git init -q repo; cd repo; echo hi > f; git add f; "
                     "git -c user.name=t -c user.email=t@example.invalid commit -q -m one; "
                     "git log --oneline | grep -q one; git status --short; echo git-ok"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("git-ok"));
}

TEST_P(SeccompLaneTest, Python3WorksUnderTheFilter) {
  CliResult r = Run({}, {"/usr/bin/python3", "-c",
                         "import subprocess, threading, socket, tempfile, os;"
                         "t = threading.Thread(target=lambda: None); t.start(); t.join();"
                         "print(subprocess.run(['echo', 'sub'], capture_output=True).stdout);"
                         "socket.socket(socket.AF_INET6).close();"
                         "print('py-ok', os.getpid() > 0)"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("py-ok True"));
}

TEST_P(SeccompLaneTest, GccAndMakeBuildAProgramUnderTheFilter) {
  const std::string dir = install_->workspace() + "/cbuild";
  ASSERT_TRUE(MakeDirs(dir, 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/hello.c",
                                  "#include <stdio.h>\nint main(void){puts(\"c-ok\");return 0;}\n",
                                  0644)
                  .ok());
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/Makefile", "hello: hello.c\n\tgcc -O2 -o $@ $<\n", 0644).ok());
  ASSERT_EQ(::chown(dir.c_str(), GetParam().uid, GetParam().uid), 0);
  CliResult r = Run({}, {"/bin/sh", "-c", "cd cbuild && make -s && ./hello"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("c-ok"));
}

TEST_P(SeccompLaneTest, NpmInstallOfALocalTarballWorksUnderTheFilter) {
  if (::access("/usr/bin/npm", X_OK) != 0) GTEST_SKIP() << "npm is not installed (make agents)";
  // A tiny package, packed and installed offline, all inside the run.
  const std::string script =
      "set -e; export HOME=$PWD/npmhome npm_config_cache=$PWD/npmhome/.npm; mkdir -p npmhome "
      "tiny app; cd tiny; printf '{\"name\":\"tiny\",\"version\":\"1.0.0\",\"main\":\"i.js\"}' "
      "> package.json; echo 'module.exports = \"npm-ok\"' > i.js; npm pack --silent >/dev/null; "
      "cd ../app; echo '{}' > package.json; npm install --offline --no-audit --no-fund "
      "--loglevel=error ../tiny/tiny-1.0.0.tgz >/dev/null; node -e "
      "'console.log(require(\"tiny\"))'";
  CliResult r = Run({}, {"/bin/sh", "-c", script});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("npm-ok"));
}

INSTANTIATE_TEST_SUITE_P(Lanes, SeccompLaneTest,
                         ::testing::Values(Lane{"root", 0, true},
                                           Lane{"uid1654", kUnprivilegedUid, true},
                                           Lane{"unconfined", kUnprivilegedUid, false}),
                         [](const auto& p) { return std::string(p.param.name); });

// `ip addr` reads NETLINK_ROUTE, the one netlink protocol the filter leaves: in a filtered run
// it lists the run's own veth.
class SeccompFilteredRunTest : public FakeInternetLaneTest {};

TEST_F(SeccompFilteredRunTest, IpAddrWorksInAFilteredRun) {
  CliResult r = RunCodespace(install_,
                             {"run", "-q", "--workspace", install_.workspace(), "--egress",
                              "allowlist", "--allow", "203.0.113.20:8080", "--", "ip", "addr"},
                             {{"CODESPACE_DNS_UPSTREAM", kDnsServerV4}},
                             net_->WorkerHostArgv({}, WorkerResolvConf::kHost));
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("eth0"));
  EXPECT_THAT(r.output, HasSubstr("inet "));
  auto rec = LatestRecord(install_);
  EXPECT_EQ(rec["plan"], "filtered") << rec.dump();
  EXPECT_THAT(rec["seccomp"].get<std::string>(), HasSubstr("sha256:"));
}

}  // namespace
}  // namespace codespace::lanes
