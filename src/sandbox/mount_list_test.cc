#include "sandbox/mount_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "sandbox/host_layout.h"
#include "sandbox/inside_user.h"

namespace codespace {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;
using Kind = ViewMount::Kind;
using PathKind = HostPath::Kind;

ViewMount M(Kind k, std::string src, std::string dst, int perms = -1, int fd = -1) {
  ViewMount m;
  m.kind = k;
  m.source = std::move(src);
  m.dest = std::move(dst);
  m.perms = perms;
  m.fd = fd;
  return m;
}
ViewMount RoBind(const std::string& p) { return M(Kind::kRoBind, p, p); }
ViewMount MaskFile(const std::string& p) { return M(Kind::kMaskFile, "/dev/null", p); }
ViewMount MaskDir(const std::string& p) { return M(Kind::kReadOnlyTmpfs, "", p); }
ViewMount Link(const std::string& target, const std::string& p) {
  return M(Kind::kSymlink, target, p);
}

HostPath Dir() { return {PathKind::kDirectory, "", "", PathKind::kAbsent}; }
HostPath File() { return {PathKind::kFile, "", "", PathKind::kAbsent}; }
HostPath Symlink(std::string text, std::string resolved, PathKind resolved_kind) {
  return {PathKind::kSymlink, std::move(text), std::move(resolved), resolved_kind};
}

// A merged-/usr Debian 12 host like this one: /bin, /sbin, /lib, /lib64, /lib32 symlinks into
// /usr, no /libx32; /etc/shadow and friends, one SSH host key, /etc/ssl/private; /proc/sys.
HostLayout MergedUsrHost() {
  HostLayout h;
  h.paths["/usr"] = Dir();
  h.paths["/etc"] = Dir();
  h.paths["/etc/resolv.conf"] = File();
  h.paths["/bin"] = Symlink("usr/bin", "/usr/bin", PathKind::kDirectory);
  h.paths["/sbin"] = Symlink("usr/sbin", "/usr/sbin", PathKind::kDirectory);
  h.paths["/lib"] = Symlink("usr/lib", "/usr/lib", PathKind::kDirectory);
  h.paths["/lib64"] = Symlink("usr/lib64", "/usr/lib64", PathKind::kDirectory);
  h.paths["/lib32"] = Symlink("usr/lib32", "/usr/lib32", PathKind::kDirectory);
  for (const char* f : {"/etc/shadow", "/etc/gshadow", "/etc/passwd-", "/etc/sudoers"}) {
    h.paths[f] = File();
  }
  h.paths["/etc/ssl/private"] = Dir();
  h.paths["/etc/sudoers.d"] = Dir();
  h.paths["/etc/ssh/ssh_host_ed25519_key"] = File();
  h.ssh_host_keys = {"/etc/ssh/ssh_host_ed25519_key"};
  h.paths["/proc/sys"] = Dir();
  h.paths["/proc/kcore"] = File();
  h.paths["/proc/acpi"] = Dir();
  return h;
}

// The whole default view on a merged-/usr host, pinned.
TEST(MountListTest, DefaultViewOnAMergedUsrHost) {
  MountPlan p = BuildMountPlan(FsView{}, MergedUsrHost());
  EXPECT_FALSE(p.whole_host);
  EXPECT_TRUE(p.read_only_root);
  EXPECT_EQ(p.home, "/home/user");
  EXPECT_THAT(
      p.base,
      ElementsAre(RoBind("/usr"), Link("usr/bin", "/bin"), Link("usr/sbin", "/sbin"),
                  Link("usr/lib", "/lib"), Link("usr/lib64", "/lib64"), Link("usr/lib32", "/lib32"),
                  RoBind("/etc"), MaskFile("/etc/shadow"), MaskFile("/etc/gshadow"),
                  MaskFile("/etc/passwd-"), MaskFile("/etc/sudoers"), MaskDir("/etc/sudoers.d"),
                  MaskDir("/etc/ssl/private"), MaskFile("/etc/ssh/ssh_host_ed25519_key"),
                  M(Kind::kRoData, "", "/etc/passwd", 0644, kPasswdFd),
                  M(Kind::kRoData, "", "/etc/group", 0644, kGroupFd)));
  EXPECT_THAT(p.proc,
              ElementsAre(RoBind("/proc/sys"), MaskFile("/proc/kcore"), MaskDir("/proc/acpi")));
  EXPECT_THAT(p.extra,
              ElementsAre(M(Kind::kTmpfs, "", "/run"), M(Kind::kTmpfs, "", "/home/user", 0700)));
  EXPECT_THAT(p.user, IsEmpty());
}

// Not on the list, so not in the view: homes, /root, /var (but /var/tmp, bwrap_args' tmpfs),
// /run (a private tmpfs instead), /srv, /mnt, /media, /boot, /opt, /sys.
TEST(MountListTest, DefaultViewShowsNothingElseOfTheHost) {
  MountPlan p = BuildMountPlan(FsView{}, MergedUsrHost());
  for (const auto* list : {&p.base, &p.proc, &p.extra}) {
    for (const ViewMount& m : *list) {
      if (m.kind != Kind::kRoBind && m.kind != Kind::kBind) continue;
      for (const char* hidden : {"/home", "/root", "/var", "/run", "/srv", "/mnt", "/media",
                                 "/boot", "/opt", "/sys", "/tmp"}) {
        EXPECT_FALSE(PathContains(hidden, m.source)) << m.source << " shows " << hidden;
      }
    }
  }
}

TEST(MountListTest, SplitUsrHostBindsItsDirectories) {
  HostLayout h = MergedUsrHost();
  h.paths["/bin"] = Dir();
  h.paths["/lib"] = Dir();
  h.paths["/lib64"] = HostPath{};  // absent
  h.paths["/libx32"] = Dir();
  MountPlan p = BuildMountPlan(FsView{}, h);
  EXPECT_THAT(p.base, Contains(RoBind("/bin")));
  EXPECT_THAT(p.base, Contains(RoBind("/lib")));
  EXPECT_THAT(p.base, Contains(RoBind("/libx32")));
  for (const ViewMount& m : p.base) EXPECT_NE(m.dest, "/lib64");
}

// The host view: today's whole-host read-only root, with the same secrets masked, the same
// /proc and the same identity files; no private /run or HOME.
TEST(MountListTest, HostView) {
  FsView v;
  v.kind = FsViewKind::kHost;
  MountPlan p = BuildMountPlan(v, MergedUsrHost());
  EXPECT_TRUE(p.whole_host);
  EXPECT_FALSE(p.read_only_root);
  EXPECT_EQ(p.home, "/tmp");
  EXPECT_THAT(p.base, Not(Contains(RoBind("/usr"))));
  EXPECT_THAT(p.base, Contains(MaskFile("/etc/shadow")));
  EXPECT_THAT(p.base, Contains(MaskDir("/etc/ssl/private")));
  EXPECT_THAT(p.base, Contains(M(Kind::kRoData, "", "/etc/passwd", 0644, kPasswdFd)));
  EXPECT_THAT(p.proc, Contains(RoBind("/proc/sys")));
  EXPECT_THAT(p.extra, IsEmpty());
}

// Every secret on the list is masked wherever the host has it, in both views.
TEST(MountListTest, EverySecretThatExistsIsMasked) {
  HostLayout h = MergedUsrHost();
  for (const std::string& s : EtcSecrets()) h.paths[s] = File();
  for (FsViewKind k : {FsViewKind::kDefault, FsViewKind::kHost}) {
    FsView v;
    v.kind = k;
    MountPlan p = BuildMountPlan(v, h);
    for (const std::string& s : EtcSecrets()) EXPECT_THAT(p.base, Contains(MaskFile(s))) << s;
    for (const char* s :
         {"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers",
          "/etc/sudoers.d", "/etc/ssl/private", "/etc/security/opasswd", "/etc/codespace"}) {
      EXPECT_THAT(EtcSecrets(), Contains(s));
    }
  }
}

// A secret that is a symlink is masked where it leads when that is in the view, and not at all
// when it leads out of it (nothing there to see, and bubblewrap could not mount there).
TEST(MountListTest, SymlinkedSecrets) {
  HostLayout h = MergedUsrHost();
  h.paths["/etc/ssl/private"] =
      Symlink("../usr/share/keys", "/usr/share/keys", PathKind::kDirectory);
  h.paths["/etc/krb5.keytab"] =
      Symlink("/var/lib/krb5.keytab", "/var/lib/krb5.keytab", PathKind::kFile);
  MountPlan p = BuildMountPlan(FsView{}, h);
  EXPECT_THAT(p.base, Contains(MaskDir("/usr/share/keys")));
  EXPECT_THAT(p.base, Not(Contains(MaskFile("/var/lib/krb5.keytab"))));
  FsView host;
  host.kind = FsViewKind::kHost;
  EXPECT_THAT(BuildMountPlan(host, h).base, Contains(MaskFile("/var/lib/krb5.keytab")));
}

// systemd-resolved: /etc/resolv.conf → /run/systemd/resolve/stub-resolv.conf. The private /run
// gets that one file at its own path, so the symlink resolves; a resolv.conf that is a file, or a
// symlink within /etc or /usr, needs nothing.
TEST(MountListTest, ResolvConfSymlinkIntoRun) {
  HostLayout h = MergedUsrHost();
  h.paths["/etc/resolv.conf"] = Symlink("../run/systemd/resolve/stub-resolv.conf",
                                        "/run/systemd/resolve/stub-resolv.conf", PathKind::kFile);
  MountPlan p = BuildMountPlan(FsView{}, h);
  EXPECT_THAT(p.extra, ElementsAre(M(Kind::kTmpfs, "", "/run"),
                                   RoBind("/run/systemd/resolve/stub-resolv.conf"),
                                   M(Kind::kTmpfs, "", "/home/user", 0700)));
  h.paths["/etc/resolv.conf"] =
      Symlink("resolvconf/resolv.conf", "/etc/resolvconf/resolv.conf", PathKind::kFile);
  EXPECT_EQ(BuildMountPlan(FsView{}, h).extra.size(), 2u);
  h.paths["/etc/resolv.conf"] = Symlink("/run/gone", "", PathKind::kAbsent);  // dangling
  EXPECT_EQ(BuildMountPlan(FsView{}, h).extra.size(), 2u);
}

TEST(MountListTest, TheSpecsBindsThenItsHides) {
  HostLayout h = MergedUsrHost();
  h.paths["/srv/keys"] = Dir();
  h.paths["/var/cache/agents/.env"] = File();
  FsView v;
  v.binds = {{"/var/cache/agents", "/var/cache/agents", true}, {"/srv/data", "/data", false}};
  v.hides = {"/var/cache/agents/.env", "/data/keys", "/nowhere"};
  h.paths["/srv/data/keys"] = Dir();
  MountPlan p = BuildMountPlan(v, h);
  EXPECT_THAT(p.user, ElementsAre(RoBind("/var/cache/agents"), M(Kind::kBind, "/srv/data", "/data"),
                                  MaskFile("/var/cache/agents/.env"), MaskDir("/data/keys")));
}

TEST(MountListTest, CandidatePathsCoverEverythingThePlanLooksAt) {
  FsView v;
  v.binds = {{"/srv/data", "/data", true}};
  v.hides = {"/data/x"};
  auto paths = ViewCandidatePaths(v);
  for (const char* p : {"/usr", "/etc", "/bin", "/lib64", "/libx32", "/etc/resolv.conf",
                        "/etc/shadow", "/proc/sys", "/proc/kcore", "/srv/data/x"}) {
    EXPECT_THAT(paths, Contains(p));
  }
}

// This host, read for real: the layout the table above assumes is what ReadHostLayout sees on
// a merged-/usr Debian (skipped where /lib is a directory).
TEST(HostLayoutTest, ReadsThisHostsSymlinkedLib) {
  HostLayout h = ReadHostLayout(FsView{});
  EXPECT_EQ(h.Lookup("/usr").kind, PathKind::kDirectory);
  EXPECT_EQ(h.Lookup("/etc").kind, PathKind::kDirectory);
  const HostPath& lib = h.Lookup("/lib");
  if (lib.kind != PathKind::kSymlink) GTEST_SKIP() << "/lib is not a symlink on this host";
  EXPECT_EQ(lib.link_text, "usr/lib");
  EXPECT_EQ(lib.resolved, "/usr/lib");
  EXPECT_EQ(lib.resolved_kind, PathKind::kDirectory);
}

TEST(InsideUserTest, PasswdAndGroupNameTheRunsUserAndNoHostAccount) {
  EXPECT_EQ(InsidePasswd("/home/user"),
            "root:x:0:0:root:/root:/bin/sh\n"
            "user:x:1000:1000:codespace run:/home/user:/bin/sh\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
  EXPECT_EQ(InsideGroup(), "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n");
}

}  // namespace
}  // namespace codespace
