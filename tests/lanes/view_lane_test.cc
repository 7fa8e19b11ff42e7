// The file-system view and the identity inside (docs/view.md), with the real binary, in every
// lane where bubblewrap confines: root severed, root filtered (the fake internet), root shared,
// uid 1654 severed and shared. Each wall is an escape_probe action that exits with its own code
// when the forbidden thing works, and each is first shown able to fail: run outside the sandbox
// (as root, where the forbidden thing works), it does exit with that code. Nothing is written:
// writability is open(O_WRONLY) without O_CREAT or O_TRUNC.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <random>
#include <thread>

#include "base/file_util.h"
#include "harness/fake_internet.h"
#include "lanes/lane_test_util.h"

namespace codespace::lanes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct ViewLane {
  const char* name;
  uid_t uid;
  const char* egress;  // none | allowlist (filtered, the fake internet) | open
};

// A listening unix socket, by path or abstract name, made in the calling thread's network
// namespace (or in `netns_path`'s: abstract names are per network namespace).
class UnixListener {
 public:
  UnixListener(const std::string& name, bool abstract, const std::string& netns_path = "") {
    auto make = [&] {
      if (!netns_path.empty()) {
        UniqueFd ns(::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!ns || ::setns(ns.get(), CLONE_NEWNET) != 0) return;
      }
      UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::memcpy(a.sun_path + (abstract ? 1 : 0), name.data(), name.size());
      auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() +
                                        (abstract ? 1 : 0));
      if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), len) == 0 &&
          ::listen(s.get(), 16) == 0) {
        fd_ = std::move(s);
      }
    };
    // Its own thread: setns moves only the calling thread, and this one goes away after.
    std::thread(make).join();
  }
  bool ok() const { return fd_.valid(); }

 private:
  UniqueFd fd_;
};

std::string Unique() {
  std::random_device rd;
  return fmt::format("{:08x}", rd());
}

class ViewLaneTest : public ::testing::TestWithParam<ViewLane> {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_FOR_LANES();
    if (filtered()) {
      auto net = FakeInternet::Create();
      ASSERT_TRUE(net.ok()) << net.status().ToString();
      net_ = std::move(*net);
      ASSERT_TRUE(net_->SetWorkerHostForwarding(true).ok());
    }
    install_ = std::make_unique<StagedInstall>(GetParam().uid);
    ASSERT_TRUE(install_->ok()) << install_->error();
    // Host sockets a run must not reach: under /tmp and /run by path, and an abstract one in
    // the worker's own network namespace (the worker host's, for the filtered lane).
    const std::string u = Unique();
    tmp_sock_dir_ = "/tmp/codespace-view-" + u;
    run_sock_dir_ = "/run/codespace-view-" + u;
    for (const std::string& d : {tmp_sock_dir_, run_sock_dir_})
      ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
    tmp_listener_ = std::make_unique<UnixListener>(tmp_sock_dir_ + "/s", false);
    run_listener_ = std::make_unique<UnixListener>(run_sock_dir_ + "/s", false);
    abstract_ = "codespace-view-" + u;
    abstract_listener_ =
        std::make_unique<UnixListener>(abstract_, true, net_ ? net_->worker_host_netns_path() : "");
    ASSERT_TRUE(tmp_listener_->ok() && run_listener_->ok() && abstract_listener_->ok());
    for (const std::string& s : {tmp_sock_dir_ + "/s", run_sock_dir_ + "/s"}) {
      ::chmod(s.c_str(), 0777);
    }
    other_workspace_ = install_->root() + "/other-workspace";
    ASSERT_TRUE(MakeDirs(other_workspace_, 0755).ok());
  }
  void TearDown() override {
    if (install_) install_->WaitForSupervisors();
    tmp_listener_.reset();
    run_listener_.reset();
    for (const std::string& d : {tmp_sock_dir_, run_sock_dir_}) {
      if (!d.empty()) RemoveTree(d).IgnoreError();
    }
  }
  bool filtered() const { return std::string(GetParam().egress) == "allowlist"; }
  bool shared() const { return std::string(GetParam().egress) == "open"; }

  CliResult Run(const std::vector<std::string>& flags, const std::vector<std::string>& cmd) {
    std::vector<std::string> a = {"run", "--workspace", install_->workspace(), "--egress",
                                  GetParam().egress};
    if (filtered()) {
      a.push_back("--allow");
      a.push_back("allowed.test");
    }
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), cmd.begin(), cmd.end());
    std::map<std::string, std::string> env;
    std::vector<std::string> wrapper;
    if (net_) {
      env["CODESPACE_DNS_UPSTREAM"] = kDnsServerV4;
      wrapper = net_->WorkerHostArgv({}, WorkerResolvConf::kHost);
    }
    return RunCodespace(*install_, a, env, wrapper);
  }
  // The probe inside, with `action` and `arg`; its exit code (and output, on failure).
  CliResult Probe(const std::string& action, const std::string& arg,
                  const std::vector<std::string>& flags = {}) {
    return Run(flags, {install_->probe(), action, arg});
  }
  // The same probe outside every sandbox, as root: the control.
  int Outside(const std::string& action, const std::string& arg) {
    auto r = RunCommand({install_->probe(), action, arg}, {});
    return r.ok() ? r->status.ShellCode() : -1;
  }

  std::unique_ptr<FakeInternet> net_;
  std::unique_ptr<StagedInstall> install_;
  std::string tmp_sock_dir_, run_sock_dir_, abstract_, other_workspace_;
  std::unique_ptr<UnixListener> tmp_listener_, run_listener_, abstract_listener_;
};

// Item 1: no run changes a host sysctl. The control opens the same files for writing as root,
// outside (nothing is written).
TEST_P(ViewLaneTest, HostWideKernelSettingsAreReadOnly) {
  std::vector<std::string> paths = {"/proc/sys/kernel/domainname", "/proc/sys/kernel/core_pattern",
                                    "/proc/sys/vm/overcommit_memory"};
  if (::access("/proc/sysrq-trigger", F_OK) == 0) paths.push_back("/proc/sysrq-trigger");
  for (const std::string& p : paths) {
    ASSERT_EQ(Outside("no-write-open", p), 21) << "control: root outside cannot open " << p;
    for (const char* fs : {"default", "host"}) {
      CliResult r = Probe("no-write-open", p, {"--fs", fs});
      EXPECT_EQ(r.code(), 0) << p << " is writable inside (--fs " << fs << "): " << Describe(r);
    }
  }
}

// Item 2: /etc's secrets are masked, and a mask refuses writes.
TEST_P(ViewLaneTest, EtcSecretsAreMaskedAndRefuseWrites) {
  ASSERT_EQ(Outside("no-read", "/etc/shadow"), 23) << "control: /etc/shadow is readable as root";
  ASSERT_EQ(Outside("no-write-open", "/etc/shadow"), 21);
  for (const char* fs : {"default", "host"}) {
    CliResult read = Probe("no-read", "/etc/shadow", {"--fs", fs});
    EXPECT_EQ(read.code(), 0) << "--fs " << fs << ": " << Describe(read);
    CliResult write = Probe("no-write-open", "/etc/shadow", {"--fs", fs});
    EXPECT_EQ(write.code(), 0) << "--fs " << fs << ": " << Describe(write);
    if (::access("/etc/ssl/private", F_OK) == 0) {
      CliResult mkdir = Probe("no-mkdir", "/etc/ssl/private/codespace-view-probe", {"--fs", fs});
      EXPECT_EQ(mkdir.code(), 0) << "--fs " << fs
                                 << ": a masked directory took a new entry: " << Describe(mkdir);
      CliResult listing = Run({"--fs", fs}, {"/bin/ls", "-A", "/etc/ssl/private"});
      EXPECT_EQ(listing.code(), 0) << Describe(listing);
    }
  }
  // The control for no-mkdir: outside, in a directory of the test's own, it creates.
  ASSERT_EQ(Outside("no-mkdir", install_->root() + "/mkdir-control"), 26);
}

// Item 2: what the default view does not show. Each control: it exists outside.
TEST_P(ViewLaneTest, HomesRootVarRunAndOtherRunsAreNotVisible) {
  std::vector<std::string> hidden = {"/root",
                                     "/var/lib",
                                     "/var/cache",
                                     run_sock_dir_,
                                     install_->state_dir(),
                                     install_->state_dir() + "/runs",
                                     other_workspace_};
  for (const char* maybe : {"/srv", "/mnt", "/media", "/boot", "/opt", "/sys/kernel"}) {
    if (::access(maybe, F_OK) == 0) hidden.push_back(maybe);
  }
  // Every home on the host (/home itself holds only the run's private one inside).
  if (DIR* d = ::opendir("/home")) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != ".." && name != "user") hidden.push_back("/home/" + name);
    }
    ::closedir(d);
  }
  CliResult homes = Run({"-q"}, {"/bin/ls", "-A", "/home"});
  EXPECT_EQ(homes.output, "user\n") << Describe(homes);
  for (const std::string& p : hidden) {
    ASSERT_EQ(Outside("absent", p), 22) << "control: " << p << " does not exist outside";
    CliResult r = Probe("absent", p);
    EXPECT_EQ(r.code(), 0) << p << " is visible in the default view: " << Describe(r);
  }
  // But the private HOME and /home/user are there; the host view shows /root.
  CliResult home = Probe("absent", "/home/user");
  EXPECT_EQ(home.code(), 22) << Describe(home);
  CliResult host = Probe("absent", "/root", {"--fs", "host"});
  EXPECT_EQ(host.code(), 22) << "--fs host hides /root: " << Describe(host);
}

// Item 2: the system is there and read-only; so is the root itself.
TEST_P(ViewLaneTest, SystemDirectoriesAreThereReadOnly) {
  CliResult r = Run({}, {"/bin/sh", "-c",
                         "for d in /usr/bin /bin /lib /etc/ssl/certs; do test -e $d || echo "
                         "missing $d; done; ls -ld /bin /lib | cut -c1; echo ok"});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, Not(HasSubstr("missing"))) << Describe(r);
  ASSERT_EQ(Outside("no-write-open", "/usr/bin/env"), 21);
  for (const auto& [action, path] : std::vector<std::pair<std::string, std::string>>{
           {"no-write-open", "/usr/bin/env"},
           {"no-write-open", "/etc/hostname"},
           {"no-mkdir", "/codespace-view-probe"},
           {"no-mkdir", "/var/codespace-view-probe"},
           {"no-mkdir", "/usr/codespace-view-probe"}}) {
    CliResult p = Probe(action, path);
    EXPECT_EQ(p.code(), 0) << action << " " << path << ": " << Describe(p);
  }
}

// Item 3: an ordinary user inside, with a HOME of its own.
TEST_P(ViewLaneTest, TheRunIsAnOrdinaryUserWithAPrivateHome) {
  CliResult who = Run({}, {install_->probe(), "whoami"});
  EXPECT_EQ(who.code(), 0) << Describe(who);
  EXPECT_THAT(who.output, HasSubstr("uid=1000 gid=1000 name=user pwhome=/home/user "
                                    "HOME=/home/user"));
  CliResult id = Run({}, {"/bin/sh", "-c",
                          "id; whoami; touch \"$HOME/f\" && ls -ln \"$HOME/f\" | cut -d' ' -f3; "
                          "getent passwd user; getent group user"});
  EXPECT_EQ(id.code(), 0) << Describe(id);
  EXPECT_THAT(id.output, HasSubstr("uid=1000(user) gid=1000(user) groups=1000(user)"));
  EXPECT_THAT(id.output, HasSubstr("\nuser\n1000\nuser:x:1000:1000:codespace run:/home/user"));
  // The host's accounts are not listed.
  CliResult passwd = Run({}, {"/bin/cat", "/etc/passwd", "/etc/group"});
  EXPECT_THAT(passwd.output, Not(HasSubstr("cloudsdk")));
  EXPECT_THAT(passwd.output, Not(HasSubstr("postgres")));
  // A spec's HOME wins.
  CliResult own = Run({"--env", "HOME=" + install_->workspace()}, {"/bin/sh", "-c", "echo $HOME"});
  EXPECT_THAT(own.output, HasSubstr(install_->workspace() + "\n"));
}

// Item 4: no host unix socket by path; an abstract one only on the worker's own network (open).
TEST_P(ViewLaneTest, HostUnixSockets) {
  for (const std::string& path : {tmp_sock_dir_ + "/s", run_sock_dir_ + "/s"}) {
    ASSERT_EQ(Outside("no-unix-connect", path), 24) << "control: " << path;
    CliResult r = Probe("no-unix-connect", path);
    EXPECT_EQ(r.code(), 0) << Describe(r);
  }
  if (net_) {
    auto control = net_->RunInWorkerHost({install_->probe(), "no-abstract-connect", abstract_});
    ASSERT_TRUE(control.ok());
    ASSERT_EQ(control->status.ShellCode(), 25) << "control: the worker host reaches @" << abstract_;
  } else {
    ASSERT_EQ(Outside("no-abstract-connect", abstract_), 25) << "control: @" << abstract_;
  }
  CliResult r = Probe(shared() ? "abstract-connect" : "no-abstract-connect", abstract_);
  // Severed and filtered: a network namespace of its own. Shared (open): the worker's, whose
  // abstract sockets it reaches (README: what each policy means).
  EXPECT_EQ(r.code(), 0) << Describe(r);
}

// Items 2 and 5: the spec's binds and hides, and the record says them.
TEST_P(ViewLaneTest, BindsAndHidesAreExactlyWhatTheSpecSays) {
  const std::string tools = install_->root() + "/tools";
  const std::string data = install_->root() + "/data";
  ASSERT_TRUE(MakeDirs(tools, 0755).ok());
  ASSERT_TRUE(MakeDirs(data, 0777).ok());
  ASSERT_EQ(::chown(data.c_str(), GetParam().uid, GetParam().uid), 0);
  // A bind is seen with the run's own host uid (a root worker's runs are a leased uid, and only
  // the workspace is idmapped: docs/identity.md): the mode grants the write, not the umask.
  ASSERT_EQ(::chmod(data.c_str(), 0777), 0);
  ASSERT_TRUE(WriteFileAtomically(tools + "/tool", "a tool\n", 0644).ok());
  ASSERT_TRUE(WriteFileAtomically(tools + "/token", "secret\n", 0644).ok());
  CliResult r = Run({"--ro-bind", tools, "--bind", data + ":/data", "--hide", tools + "/token"},
                    {"/bin/sh", "-c",
                     "cat \"$0/tool\" && touch /data/made && echo made; \"$1\" no-write-open "
                     "\"$0/tool\" || echo tool-writable; \"$1\" no-read \"$0/token\" || echo "
                     "token-read; \"$1\" no-write-open \"$0/token\" || echo token-writable",
                     tools, install_->probe()});
  EXPECT_EQ(r.code(), 0) << Describe(r);
  EXPECT_THAT(r.output, HasSubstr("a tool\nmade\n"));
  for (const char* bad : {"tool-writable", "token-read", "token-writable"}) {
    EXPECT_THAT(r.output, Not(HasSubstr(bad))) << Describe(r);
  }
  EXPECT_EQ(::access((data + "/made").c_str(), F_OK), 0) << "the read-write bind did not write";
  auto rec = LatestRecord(*install_);
  EXPECT_EQ(rec["spec"]["fs"]["view"], "default") << rec.dump();
  // The CLI orders binds by depth (docs/view.md): /data before the deeper tools directory.
  EXPECT_EQ(rec["spec"]["fs"]["binds"].size(), 2u) << rec.dump();
  EXPECT_EQ(rec["spec"]["fs"]["binds"][0]["destination"], "/data") << rec.dump();
  EXPECT_EQ(rec["spec"]["fs"]["binds"][0]["read_only"], false) << rec.dump();
  EXPECT_EQ(rec["spec"]["fs"]["binds"][1]["source"], tools) << rec.dump();
  EXPECT_EQ(rec["spec"]["fs"]["binds"][1]["read_only"], true) << rec.dump();
  EXPECT_EQ(rec["spec"]["fs"]["hide"][0], tools + "/token") << rec.dump();
  CliResult show = RunCodespace(*install_, {"show", "latest"});
  EXPECT_THAT(show.output,
              HasSubstr(fmt::format(
                  "view:      default; bind {1}:/data; ro-bind {0}; hide {0}/token", tools, data)));
  Run({"--fs", "host"}, {"/bin/true"});
  EXPECT_EQ(LatestRecord(*install_)["spec"]["fs"]["view"], "host");
}

INSTANTIATE_TEST_SUITE_P(Lanes, ViewLaneTest,
                         ::testing::Values(ViewLane{"RootSevered", 0, "none"},
                                           ViewLane{"RootFiltered", 0, "allowlist"},
                                           ViewLane{"RootShared", 0, "open"},
                                           ViewLane{"Uid1654Severed", kUnprivilegedUid, "none"},
                                           ViewLane{"Uid1654Shared", kUnprivilegedUid, "open"}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// Refused before anything is spent, with the reason (the CLI; the API's rules are the same
// function, pinned in spec_check_test).
TEST(ViewRefusalLaneTest, BadBindsAreRefusedBeforeAnythingRuns) {
  REQUIRE_ROOT_FOR_LANES();
  StagedInstall install(0);
  ASSERT_TRUE(install.ok()) << install.error();
  auto run = [&](std::vector<std::string> flags) {
    std::vector<std::string> a = {"run", "--workspace", install.workspace()};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.push_back("/bin/true");
    return RunCodespace(install, a);
  };
  const struct {
    std::vector<std::string> flags;
    const char* says;
  } rows[] = {
      {{"--ro-bind", "/nonexistent/codespace"}, "No such file or directory"},
      {{"--ro-bind", "relative/path"}, "is not an absolute path"},
      {{"--bind", "/usr:/proc/x"}, "is under /proc"},
      {{"--bind", "/usr:/dev/.codespace-init"}, "is under /dev"},
      {{"--ro-bind", install.state_dir()}, "state dir"},
      {{"--hide", "/no/such/thing"}, "No such file or directory"},
      {{"--fs", "everything"}, "expected default or host"},
  };
  for (const auto& row : rows) {
    CliResult r = run(row.flags);
    EXPECT_EQ(r.code(), 125) << Describe(r);
    EXPECT_THAT(r.output, HasSubstr(row.says)) << Describe(r);
  }
  EXPECT_TRUE(install.RunIds().empty()) << "a refused view made a run";
}

// Unconfined: no bubblewrap, no view — the command sees the host as the worker does, and the
// posture line says so.
TEST(ViewUnconfinedLaneTest, WithoutBubblewrapTheViewIsTheHosts) {
  REQUIRE_ROOT_FOR_LANES();
  StagedInstall install(kUnprivilegedUid);
  ASSERT_TRUE(install.ok()) << install.error();
  std::map<std::string, std::string> env = {{"CODESPACE_BWRAP_PATH", "/nonexistent/bwrap"}};
  CliResult r = RunCodespace(install,
                             {"run", "--workspace", install.workspace(), "--egress", "open", "--",
                              install.probe(), "absent", "/root"},
                             env);
  EXPECT_THAT(r.output, HasSubstr("confines=no"));
  EXPECT_THAT(r.output, HasSubstr("view=host"));
  EXPECT_EQ(r.code(), 22) << "an unconfined run should see the host's /root: " << Describe(r);
  CliResult confined = RunCodespace(install, {"posture"});
  EXPECT_THAT(confined.output, HasSubstr("confines=yes"));
  EXPECT_THAT(confined.output, HasSubstr("view=default"));
}

}  // namespace
}  // namespace codespace::lanes
