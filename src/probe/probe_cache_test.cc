// Remembered probes: the file format and its freshness rules (pure), the key moving with what
// the expensive probes depend on, and ProbeHostRemembering against the real probes.
#include "probe/probe_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "base/file_util.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "base/unique_fd.h"

namespace codespace {
namespace {

constexpr int64_t kMinute = 60 * 1000;

ExpensiveProbes Sample() {
  ExpensiveProbes p;
  p.confinement.confines = true;
  p.confinement.bwrap_path = "/usr/bin/bwrap";
  p.namespace_ok = false;
  p.namespace_error = "cannot create a network namespace: Operation not permitted\nsecond line";
  return p;
}

TEST(ProbeCacheFormatTest, RoundTripsForTheSameKeyWhileFresh) {
  std::string text = EncodeProbeCache("the key\\with\nodd bytes", Sample(), 1000);
  auto back = DecodeFreshProbeCache(text, "the key\\with\nodd bytes", 1000 + kMinute, 10 * kMinute);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->confinement.confines);
  EXPECT_EQ(back->confinement.bwrap_path, "/usr/bin/bwrap");
  EXPECT_EQ(back->confinement.error, "");
  EXPECT_FALSE(back->namespace_ok);
  EXPECT_EQ(back->namespace_error, Sample().namespace_error);
}

TEST(ProbeCacheFormatTest, AnyOtherKeyIsAMiss) {
  std::string text = EncodeProbeCache("key-a", Sample(), 1000);
  EXPECT_FALSE(DecodeFreshProbeCache(text, "key-b", 1000, 10 * kMinute));
  EXPECT_FALSE(DecodeFreshProbeCache(text, "key-a ", 1000, 10 * kMinute));
  EXPECT_FALSE(DecodeFreshProbeCache(text, "", 1000, 10 * kMinute));
}

TEST(ProbeCacheFormatTest, OldOrFutureIsAMiss) {
  std::string text = EncodeProbeCache("k", Sample(), 100000);
  EXPECT_TRUE(DecodeFreshProbeCache(text, "k", 100000, kMinute));
  EXPECT_TRUE(DecodeFreshProbeCache(text, "k", 100000 + kMinute - 1, kMinute));
  EXPECT_FALSE(DecodeFreshProbeCache(text, "k", 100000 + kMinute, kMinute));
  EXPECT_FALSE(DecodeFreshProbeCache(text, "k", 99999, kMinute));  // clock went back
  EXPECT_FALSE(DecodeFreshProbeCache(text, "k", 100000, 0));       // remembering off
}

TEST(ProbeCacheFormatTest, TornOrMalformedIsAMiss) {
  std::string text = EncodeProbeCache("k", Sample(), 1000);
  for (size_t cut = 0; cut < text.size(); ++cut) {
    EXPECT_FALSE(DecodeFreshProbeCache(text.substr(0, cut), "k", 1000, kMinute)) << cut;
  }
  std::string bad_flag = text;
  bad_flag.replace(bad_flag.find("confines 1"), 10, "confines y");
  EXPECT_FALSE(DecodeFreshProbeCache(bad_flag, "k", 1000, kMinute));
  std::string extra = text + "more\n";
  EXPECT_FALSE(DecodeFreshProbeCache(extra, "k", 1000, kMinute));
  // "confines" without the bubblewrap that confined is not a state the probe can produce.
  ExpensiveProbes no_path = Sample();
  no_path.confinement.bwrap_path.clear();
  EXPECT_FALSE(DecodeFreshProbeCache(EncodeProbeCache("k", no_path, 1000), "k", 1000, kMinute));
}

// Runs `fn` in a forked child and returns its key (namespaces and privileges stay there).
std::string KeyInChild(const std::function<bool()>& prepare, const ProbeOptions& o) {
  auto p = MakePipe();
  if (!p.ok()) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    p->read.reset();
    std::string key = prepare() ? ProbeCacheKey(o) : "prepare failed";
    WriteAll(p->write.get(), key).IgnoreError();
    ::_exit(0);
  }
  p->write.reset();
  auto key = ReadAll(p->read.get());
  ::waitpid(pid, nullptr, 0);
  return key.ok() ? *key : "read failed";
}

TEST(ProbeCacheKeyTest, StableWhileNothingChangesAndMovesWithWhatTheProbesDependOn) {
  ProbeOptions o = ProbeOptionsFromEnvironment();
  const std::string key = ProbeCacheKey(o);
  EXPECT_EQ(ProbeCacheKey(o), key);
  EXPECT_EQ(KeyInChild([] { return true; }, o), key);

  ProbeOptions other_path = o;
  other_path.path_env = "/nonexistent";
  EXPECT_NE(ProbeCacheKey(other_path), key);
  ProbeOptions override_bwrap = o;
  override_bwrap.bwrap_override = "/bin/true";
  EXPECT_NE(ProbeCacheKey(override_bwrap), key);
  ProbeOptions require = o;
  require.require_confinement = !o.require_confinement;
  EXPECT_NE(ProbeCacheKey(require), key);

  // Another uid, no_new_privs, another mount or network namespace: all probe again.
  EXPECT_NE(KeyInChild([] { return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0; }, o), key);
  if (::geteuid() == 0) {
    EXPECT_NE(KeyInChild([] { return ::unshare(CLONE_NEWNET) == 0; }, o), key);
    EXPECT_NE(KeyInChild([] { return ::unshare(CLONE_NEWNS) == 0; }, o), key);
    EXPECT_NE(KeyInChild([] { return ::setresuid(1654, 1654, 1654) == 0; }, o), key);
  }
}

// In a mount namespace of its own: a namespace pinned by a bind mount (what every filtered run
// makes under /run/netns for its life) is no change that matters to the probes; any other mount
// is.
TEST(ProbeCacheKeyTest, NamespacePinsDoNotMoveItOtherMountsDo) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount";
  TempDir dir;
  std::string pin = dir.path() + "/pin";
  ASSERT_OK(WriteFileAtomically(pin, ""));
  auto p = MakePipe();
  ASSERT_OK(p.status());
  pid_t pid = ::fork();
  if (pid == 0) {
    p->read.reset();
    auto report = [&](const std::string& what) {
      WriteAll(p->write.get(), what).IgnoreError();
      ::_exit(0);
    };
    if (::unshare(CLONE_NEWNS) != 0) report("unshare failed");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) report("private failed");
    ProbeOptions o = ProbeOptionsFromEnvironment();
    std::string before = ProbeCacheKey(o);
    if (::mount("/proc/self/ns/net", pin.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      report("pin failed");
    }
    std::string pinned = ProbeCacheKey(o);
    if (::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, nullptr) != 0) report("tmpfs failed");
    std::string mounted = ProbeCacheKey(o);
    report(std::string(pinned == before ? "pin:same" : "pin:moved") +
           (mounted == pinned ? " tmpfs:same" : " tmpfs:moved"));
  }
  p->write.reset();
  auto got = ReadAll(p->read.get());
  ::waitpid(pid, nullptr, 0);
  ASSERT_OK(got.status());
  EXPECT_EQ(*got, "pin:same tmpfs:moved");
}

TEST(ProbeHostRememberingTest, ProbesOnceThenRemembersTheSameFactsAndForgets) {
  TempDir dir;
  std::string cache = dir.path() + "/probes";
  ProbeOptions o = ProbeOptionsFromEnvironment();
  ::setenv("CODESPACE_PROBE_CACHE_SECONDS", "600", 1);
  bool remembered = true;
  HostFacts first = ProbeHostRemembering(o, cache, &remembered);
  EXPECT_FALSE(remembered);
  ASSERT_EQ(::access(cache.c_str(), F_OK), 0);
  HostFacts second = ProbeHostRemembering(o, cache, &remembered);
  EXPECT_TRUE(remembered);
  HostFacts fresh = ProbeHost(o);
  for (const HostFacts* f : {&first, &second}) {
    EXPECT_EQ(f->confines, fresh.confines);
    EXPECT_EQ(f->bwrap_path, fresh.bwrap_path);
    EXPECT_EQ(f->filter.namespace_ok, fresh.filter.namespace_ok);
    EXPECT_EQ(f->filter.tools, fresh.filter.tools);
    EXPECT_EQ(f->filter.forwarding, fresh.filter.forwarding);
    EXPECT_EQ(f->can_filter(), fresh.can_filter());
  }
  ForgetProbes(cache);
  ProbeHostRemembering(o, cache, &remembered);
  EXPECT_FALSE(remembered);
}

TEST(ProbeHostRememberingTest, CheapProbesAreReadAfreshEvenWhenRemembered) {
  TempDir dir;
  std::string cache = dir.path() + "/probes";
  ::setenv("CODESPACE_PROBE_CACHE_SECONDS", "600", 1);
  ProbeOptions o = ProbeOptionsFromEnvironment();
  std::string fwd = dir.path() + "/ip_forward";
  ASSERT_OK(WriteFileAtomically(fwd, "1\n"));
  o.forwarding_path = fwd;
  bool remembered = false;
  ProbeHostRemembering(o, cache, &remembered);
  EXPECT_TRUE(ProbeHostRemembering(o, cache, &remembered).filter.forwarding);
  EXPECT_TRUE(remembered);
  o.forwarding_path = dir.path() + "/gone";
  HostFacts f = ProbeHostRemembering(o, cache, &remembered);
  EXPECT_TRUE(remembered);
  EXPECT_FALSE(f.filter.forwarding);
  EXPECT_FALSE(f.can_filter());
}

TEST(ProbeHostRememberingTest, AFileForAnotherHostStateOrTurnedOffIsNotUsed) {
  TempDir dir;
  std::string cache = dir.path() + "/probes";
  ProbeOptions o = ProbeOptionsFromEnvironment();
  // Says the host cannot confine, but for another key: ignored, the real probe runs.
  ExpensiveProbes lie;
  lie.confinement.error = "planted";
  ASSERT_OK(WriteFileAtomically(cache, EncodeProbeCache("another host", lie, 0)));
  ::setenv("CODESPACE_PROBE_CACHE_SECONDS", "600", 1);
  bool remembered = true;
  HostFacts f = ProbeHostRemembering(o, cache, &remembered);
  EXPECT_FALSE(remembered);
  EXPECT_NE(f.confine_error, "planted");

  ::setenv("CODESPACE_PROBE_CACHE_SECONDS", "0", 1);
  ForgetProbes(cache);
  ProbeHostRemembering(o, cache, &remembered);
  EXPECT_FALSE(remembered);
  EXPECT_NE(::access(cache.c_str(), F_OK), 0);
  ::unsetenv("CODESPACE_PROBE_CACHE_SECONDS");
}

}  // namespace
}  // namespace codespace
