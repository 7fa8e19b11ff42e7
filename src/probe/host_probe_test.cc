// FilterProbe on real files and real namespaces: the forwarding file passed in, the tools found
// (or not) on a PATH the test builds, and the namespace probe run with and without the
// capability it needs. Each case runs in a forked child so that mount namespaces and dropped
// privileges stay there.
#include "probe/host_probe.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>

#include "base/file_util.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "base/unique_fd.h"
#include "net/netns.h"

namespace codespace {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kUnprivilegedUid = 1654;

// Runs `fn` in a forked child and returns what it returned (the child's only way to report).
std::string InChild(const std::function<std::string()>& fn) {
  auto p = MakePipe();
  if (!p.ok()) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    p->read.reset();
    std::string out = fn();
    WriteAll(p->write.get(), out).IgnoreError();
    ::_exit(0);
  }
  p->write.reset();
  std::string out = ReadAll(p->read.get()).value_or("read failed");
  ::waitpid(pid, nullptr, 0);
  return out;
}

// In the child: a private mount namespace where `path` is bound read-only over itself.
std::string MakeReadOnly(const std::string& path) {
  if (::unshare(CLONE_NEWNS) != 0) return "unshare(CLONE_NEWNS) failed";
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return "make-private";
  if (::mount(path.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) return "bind";
  if (::mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
    return "remount ro";
  }
  return "";
}

std::string DropToUnprivileged() {
  if (::setgroups(0, nullptr) != 0 ||
      ::setresgid(kUnprivilegedUid, kUnprivilegedUid, kUnprivilegedUid) != 0 ||
      ::setresuid(kUnprivilegedUid, kUnprivilegedUid, kUnprivilegedUid) != 0) {
    return "drop privileges failed";
  }
  return "";
}

class HostProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root: read-only bind mounts and a staged unprivileged uid";
    }
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
    tools_ = dir_.path() + "/tools";
    no_tools_ = dir_.path() + "/empty";
    ASSERT_OK(MakeDirs(tools_));
    ASSERT_OK(MakeDirs(no_tools_));
    ASSERT_OK(WriteFileAtomically(tools_ + "/ip", "#!/bin/sh\n", 0755));
    ASSERT_OK(WriteFileAtomically(tools_ + "/nft", "#!/bin/sh\n", 0755));
  }
  std::string Forwarding(const char* value, const std::string& name) {
    std::string p = dir_.path() + "/" + name;
    EXPECT_OK(WriteFileAtomically(p, value, 0644));
    return p;
  }

  TempDir dir_;
  std::string tools_, no_tools_;
};

TEST_F(HostProbeTest, ForwardingReadsOne) {
  std::string err;
  EXPECT_TRUE(ProbeForwarding(Forwarding("1\n", "on"), &err));
  EXPECT_EQ(err, "");
}

TEST_F(HostProbeTest, ForwardingReadsZeroButWritable) {
  std::string err;
  EXPECT_TRUE(ProbeForwarding(Forwarding("0\n", "off"), &err)) << err;
}

TEST_F(HostProbeTest, ForwardingReadsZeroBoundReadOnlyIsNamed) {
  std::string path = Forwarding("0\n", "off-ro");
  std::string out = InChild([&] {
    std::string e = MakeReadOnly(path);
    if (!e.empty()) return "setup: " + e;
    std::string err;
    bool ok = ProbeForwarding(path, &err);
    FilterParts parts = FilterProbe(tools_, path);
    FilterVerdict v = DecideFilter(parts);
    return std::string(ok ? "ok" : "refused") + "|" + err + "|" +
           (v.can_filter ? "can" : "cannot") + "|" + v.unavailable_reason;
  });
  EXPECT_THAT(out, HasSubstr("refused|IPv4 forwarding is off"));
  EXPECT_THAT(out, HasSubstr("Read-only file system"));
  // FilterProbe names forwarding as the reason (tools and namespace hold as root).
  EXPECT_THAT(out, HasSubstr("|cannot|IPv4 forwarding is off"));
  // The probe never wrote: the file still reads 0 outside.
  EXPECT_EQ(*ReadFileToString(path), "0\n");
}

TEST_F(HostProbeTest, ForwardingReadsOneBoundReadOnlyIsFine) {
  std::string path = Forwarding("1\n", "on-ro");
  std::string out = InChild([&] {
    std::string e = MakeReadOnly(path);
    if (!e.empty()) return "setup: " + e;
    std::string err;
    return std::string(ProbeForwarding(path, &err) ? "ok" : "refused: " + err);
  });
  EXPECT_EQ(out, "ok");
}

TEST_F(HostProbeTest, ForwardingMissingFile) {
  std::string err;
  EXPECT_FALSE(ProbeForwarding(dir_.path() + "/absent", &err));
  EXPECT_THAT(err, HasSubstr("cannot read IPv4 forwarding setting"));
  EXPECT_THAT(err, HasSubstr("No such file or directory"));
}

TEST_F(HostProbeTest, ToolsFoundOrNamed) {
  std::string err;
  EXPECT_TRUE(ProbeTools(tools_, &err));
  EXPECT_FALSE(ProbeTools(no_tools_, &err));
  EXPECT_THAT(err, HasSubstr("ip not found on PATH (install iproute2)"));
  ASSERT_EQ(::unlink((tools_ + "/nft").c_str()), 0);
  EXPECT_FALSE(ProbeTools(tools_, &err));
  EXPECT_THAT(err, HasSubstr("nft not found on PATH (install nftables)"));
}

TEST_F(HostProbeTest, NamespaceAsRootAndAsUnprivilegedUid) {
  std::string err;
  EXPECT_TRUE(ProbeNamespace(&err)) << err;
  std::string out = InChild([] {
    std::string e = DropToUnprivileged();
    if (!e.empty()) return e;
    std::string why;
    return std::string(ProbeNamespace(&why) ? "created" : why);
  });
  EXPECT_EQ(out, "cannot create a network namespace: Operation not permitted");
}

// The whole probe, every combination of tools × namespace × forwarding, on real files and real
// privileges: CanFilter only when all three hold, and the reason names the first that fails.
TEST_F(HostProbeTest, FilterProbeTruthTable) {
  for (bool tools : {false, true}) {
    for (bool ns : {false, true}) {
      for (bool fwd : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "tools=" << tools << " ns=" << ns << " fwd=" << fwd);
        std::string path = Forwarding("0\n", fmt::format("fwd-{}{}{}", tools, ns, fwd));
        ASSERT_EQ(::chmod(path.c_str(), fwd ? 0666 : 0644), 0);
        std::string path_env = tools ? tools_ : no_tools_;
        std::string out = InChild([&] {
          if (!fwd) {
            std::string e = MakeReadOnly(path);
            if (!e.empty()) return "setup: " + e;
          }
          if (!ns) {
            std::string e = DropToUnprivileged();
            if (!e.empty()) return e;
          }
          FilterParts p = FilterProbe(path_env, path);
          FilterVerdict v = DecideFilter(p);
          return fmt::format("{}{}{}{}|{}", static_cast<int>(p.tools),
                             static_cast<int>(p.namespace_ok), static_cast<int>(p.forwarding),
                             static_cast<int>(v.can_filter), v.unavailable_reason);
        });
        EXPECT_EQ(out.substr(0, 4),
                  fmt::format("{}{}{}{}", static_cast<int>(tools), static_cast<int>(ns),
                              static_cast<int>(fwd), static_cast<int>(tools && ns && fwd)));
        std::string reason = out.size() > 5 ? out.substr(5) : "";
        if (!tools) {
          EXPECT_THAT(reason, HasSubstr("not found on PATH"));
        } else if (!ns) {
          EXPECT_THAT(reason, HasSubstr("cannot create a network namespace"));
        } else if (!fwd) {
          EXPECT_THAT(reason, HasSubstr("IPv4 forwarding is off"));
        } else {
          EXPECT_EQ(reason, "");
        }
      }
    }
  }
}

TEST_F(HostProbeTest, MissingBwrapOverrideMeansNoConfinement) {
  ProbeOptions o;
  o.bwrap_override = dir_.path() + "/no-bwrap-here";
  o.path_env = "/usr/bin:/bin";
  ConfinementProbe c = ProbeConfinement(o);
  EXPECT_FALSE(c.confines);
  EXPECT_THAT(c.error, HasSubstr("CODESPACE_BWRAP_PATH="));
  // Not on PATH either: a clear word.
  o.bwrap_override.clear();
  o.path_env = no_tools_;
  c = ProbeConfinement(o);
  EXPECT_FALSE(c.confines);
  EXPECT_EQ(c.error, "bubblewrap (bwrap) not found on PATH");
}

TEST_F(HostProbeTest, BwrapThatFailsItsTrialDoesNotConfine) {
  std::string fake = tools_ + "/bwrap";
  ASSERT_OK(WriteFileAtomically(fake, "#!/bin/sh\necho 'no user namespaces' >&2\nexit 1\n", 0755));
  ProbeOptions o;
  o.bwrap_override = fake;
  ConfinementProbe c = ProbeConfinement(o);
  EXPECT_FALSE(c.confines);
  EXPECT_THAT(c.error, HasSubstr("trial sandbox exited 1: no user namespaces"));
}

TEST_F(HostProbeTest, RealBubblewrapConfinesHere) {
  ProbeOptions o = ProbeOptionsFromEnvironment();
  o.bwrap_override.clear();
  ConfinementProbe c = ProbeConfinement(o);
  if (!FindExecutable("bwrap", o.path_env).ok()) GTEST_SKIP() << "bubblewrap is not installed";
  EXPECT_TRUE(c.confines) << c.error;
}

// The trial sandbox waits while a run namespace is being removed (the removal's exclusive
// netns-mount lock): its recursive read-only remount would otherwise fail on the vanishing mount
// and the host would be judged not to confine.
TEST_F(HostProbeTest, TrialSandboxWaitsWhileANamespaceIsRemoved) {
  if (::geteuid() != 0) GTEST_SKIP() << "the lock lives in /run/codespace";
  ProbeOptions o = ProbeOptionsFromEnvironment();
  o.bwrap_override.clear();
  if (!FindExecutable("bwrap", o.path_env).ok()) GTEST_SKIP() << "bubblewrap is not installed";
  auto removal = NetnsMountLock::Exclusive();
  ASSERT_OK(removal.status());
  auto probe = std::async(std::launch::async, [&] { return ProbeConfinement(o); });
  EXPECT_EQ(probe.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout)
      << "the trial sandbox ran during a namespace removal";
  removal->Release();
  ConfinementProbe c = probe.get();
  EXPECT_TRUE(c.confines) << c.error;
}

}  // namespace
}  // namespace codespace
