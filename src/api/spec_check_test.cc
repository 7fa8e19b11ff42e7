#include "api/spec_check.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "base/testing/temp_dir.h"

namespace codespace::api {
namespace {

std::string Spec(std::string_view workspace, std::string_view extra = "") {
  return std::string(R"({"argv":["true"],"workspace":")") + std::string(workspace) +
         R"(","egress":{"mode":"none"})" + std::string(extra) + "}";
}

TEST(ParseSubmittedSpec, AcceptsAGoodSpec) {
  SpecResult r = ParseSubmittedSpec(Spec("/tmp"));
  ASSERT_TRUE(std::holds_alternative<RunSpec>(r)) << std::get<SpecError>(r).message;
}

struct Case {
  std::string body;
  std::string field;
};

TEST(ParseSubmittedSpec, NamesTheField) {
  const Case cases[] = {
      {"{", ""},
      {"[]", ""},
      {R"({"argv":"true","workspace":"/tmp","egress":{"mode":"none"}})", "argv"},
      {R"({"argv":[],"workspace":"/tmp","egress":{"mode":"none"}})", "argv"},
      {R"({"argv":[""],"workspace":"/tmp","egress":{"mode":"none"}})", "argv[0]"},
      {R"({"argv":["true"],"workspace":"/tmp","egress":{"mode":"none"},"timeuot":1})", "timeuot"},
      {R"({"argv":["true"],"workspace":"/tmp","egress":{"mode":"allowlist","allowlist":["ok.test","exa mple.com"]}})",
       "egress.allowlist[1]"},
      {R"({"argv":["true"],"workspace":"/tmp","egress":{"mode":"closed"}})", "egress.mode"},
      {R"({"argv":["true"],"workspace":"/tmp","egress":{"mode":"none"},"timeout_seconds":"5"})",
       "timeout_seconds"},
      {R"({"argv":["true"],"env":["NOEQUALS"],"workspace":"/tmp","egress":{"mode":"none"}})",
       "env[0]"},
      {Spec("tmp"), "workspace"},
      {Spec(""), "workspace"},
      {Spec("/tmp/../etc"), "workspace"},
      {Spec("/tmp/./x"), "workspace"},
      {Spec("/tmp//x"), "workspace"},
      {Spec("/tmp/"), "workspace"},
      {Spec("/tmp", R"(,"broker":{"address":"example.com:80"})"), "broker.address"},
      {Spec("/tmp", R"(,"broker":{"address":"unix:relative"})"), "broker.address"},
      // The file-system view: the CLI's rules (run/fs_view.h), the JSON's field names.
      {Spec("/tmp", R"(,"fs":{"view":"everything"})"), "fs.view"},
      {Spec("/tmp", R"(,"fs":{"binds":[{"source":"rel"}]})"), "fs.binds[0].source"},
      {Spec("/tmp", R"(,"fs":{"binds":[{"source":"/usr","destination":"/proc/x"}]})"),
       "fs.binds[0].destination"},
      {Spec("/tmp", R"(,"fs":{"binds":[{"source":"/usr","destination":"/dev/.codespace-init"}]})"),
       "fs.binds[0].destination"},
      {Spec("/tmp", R"(,"fs":{"binds":[{"source":"/usr","read_only":"yes"}]})"),
       "fs.binds[0].read_only"},
      {Spec("/tmp", R"(,"fs":{"binds":[{"source":"/usr","mode":"rw"}]})"), "fs.binds[0].mode"},
      {Spec("/tmp", R"(,"fs":{"hide":["/proc/sys"]})"), "fs.hide[0]"},
      {Spec("/tmp", R"(,"fs":{"hide":["/etc/../x"]})"), "fs.hide[0]"},
  };
  for (const auto& c : cases) {
    SpecResult r = ParseSubmittedSpec(c.body);
    ASSERT_TRUE(std::holds_alternative<SpecError>(r)) << c.body;
    EXPECT_EQ(std::get<SpecError>(r).field, c.field)
        << c.body << ": " << std::get<SpecError>(r).message;
    EXPECT_FALSE(std::get<SpecError>(r).message.empty());
  }
}

TEST(CheckSpecOnHost, WorkspaceAndBroker) {
  TempDir dir;
  std::string real = dir.path() + "/ws";
  ASSERT_EQ(::mkdir(real.c_str(), 0755), 0);
  std::string link = dir.path() + "/link";
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  std::string file = dir.path() + "/file";
  ASSERT_EQ(::close(::creat(file.c_str(), 0644)), 0);
  auto check = [](const std::string& body) {
    SpecResult r = ParseSubmittedSpec(body);
    if (auto* e = std::get_if<SpecError>(&r)) return *e;
    return CheckSpecOnHost(std::get<RunSpec>(r));
  };
  EXPECT_EQ(check(Spec(real)).message, "");
  EXPECT_EQ(check(Spec(link)).field, "workspace");
  EXPECT_EQ(check(Spec(link + "/")).field, "workspace");
  EXPECT_EQ(check(Spec(file)).field, "workspace");
  EXPECT_EQ(check(Spec(dir.path() + "/missing")).field, "workspace");
  // A broker path that is a file, not a socket.
  EXPECT_EQ(check(Spec(real, R"(,"broker":{"address":"unix:)" + file + "\"}")).field,
            "broker.address");
  // A real socket passes.
  std::string sock = dir.path() + "/b.sock";
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(check(Spec(real, R"(,"broker":{"address":"unix:)" + sock + "\"}")).message, "");
  ::close(fd);
}

// The same host rules as the CLI's (one function): a missing or symlinked bind source, the
// state dir, a hide that is not there.
TEST(CheckSpecOnHost, FileSystemView) {
  TempDir dir;
  std::string ws = dir.path() + "/ws", state = dir.path() + "/state";
  for (const std::string& d : {ws, state}) ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  auto check = [&](const std::string& fs) {
    SpecResult r = ParseSubmittedSpec(Spec(ws, R"(,"fs":)" + fs));
    if (auto* e = std::get_if<SpecError>(&r)) return *e;
    return CheckSpecOnHost(std::get<RunSpec>(r), state);
  };
  EXPECT_EQ(check(R"({"view":"host"})").message, "");
  EXPECT_EQ(check(R"({"binds":[{"source":")" + dir.path() + R"(","destination":"/x"}]})").field,
            "fs.binds[0].source");  // holds the state dir
  EXPECT_EQ(check(R"({"binds":[{"source":")" + ws + R"(/missing"}]})").field, "fs.binds[0].source");
  EXPECT_EQ(
      check(R"({"binds":[{"source":")" + ws + R"(","destination":"/w"}],"hide":["/w/x"]})").field,
      "fs.hide[0]");
  EXPECT_EQ(
      check(R"({"binds":[{"source":")" + ws + R"(","destination":"/w"}],"hide":["/w"]})").message,
      "");
}

TEST(FieldOfJsonError, ExtractsThePath) {
  EXPECT_EQ(FieldOfJsonError("run spec JSON: \"egress.allowlist[1]\": allowlist entry \"x\""),
            "egress.allowlist[1]");
  EXPECT_EQ(FieldOfJsonError("run spec JSON: parse error"), "");
}

}  // namespace
}  // namespace codespace::api
