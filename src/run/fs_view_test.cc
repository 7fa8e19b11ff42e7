#include "run/fs_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/testing/temp_dir.h"

namespace codespace {
namespace {

using ::testing::HasSubstr;

TEST(FsViewTest, KindNamesRoundTrip) {
  for (FsViewKind k : {FsViewKind::kDefault, FsViewKind::kHost}) {
    auto parsed = ParseFsViewKind(FsViewKindName(k));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_FALSE(ParseFsViewKind("hostile").ok());
}

TEST(FsViewTest, BindFlagSplitsSourceAndDestination) {
  EXPECT_EQ(ParseBindFlag("/a/b", true), (FsBind{"/a/b", "/a/b", true}));
  EXPECT_EQ(ParseBindFlag("/a:/b/c", false), (FsBind{"/a", "/b/c", false}));
}

FsView WithBind(std::string src, std::string dst) {
  FsView v;
  v.binds.push_back({std::move(src), std::move(dst), true});
  return v;
}

// Every path rule, one row each: what is refused and the field the API names.
TEST(FsViewTest, ValidationTable) {
  struct Row {
    FsView view;
    const char* message;  // nullptr: accepted
    const char* field;
  };
  FsView hide_proc;
  hide_proc.hides = {"/proc/sys"};
  FsView hide_rel;
  hide_rel.hides = {"etc/x"};
  FsView hide_ok;
  hide_ok.hides = {"/etc/npmrc", "/ws/.env"};
  const Row rows[] = {
      {WithBind("/opt/tools", "/opt/tools"), nullptr, ""},
      {WithBind("/srv/data", "/data"), nullptr, ""},
      {WithBind("opt/tools", "/opt/tools"), "is not an absolute path", "fs.binds[0].source"},
      {WithBind("/opt/../etc", "/x"), "escapes through \"..\"", "fs.binds[0].source"},
      {WithBind("/opt//x", "/x"), "is not a normalised path", "fs.binds[0].source"},
      {WithBind("/opt/x/", "/x"), "is not a normalised path", "fs.binds[0].source"},
      {WithBind("/opt/./x", "/x"), "is not a normalised path", "fs.binds[0].source"},
      {WithBind("", "/x"), "is empty", "fs.binds[0].source"},
      {WithBind("/opt", "/"), "would cover the whole view", "fs.binds[0].destination"},
      {WithBind("/opt", "/proc/sys"), "is under /proc", "fs.binds[0].destination"},
      {WithBind("/opt", "/proc"), "is under /proc", "fs.binds[0].destination"},
      {WithBind("/opt", "/dev/.codespace-init"), "is under /dev", "fs.binds[0].destination"},
      {WithBind("/opt", "/sys/kernel"), "is under /sys", "fs.binds[0].destination"},
      {WithBind("/opt", "/ws"), "is the workspace itself", "fs.binds[0].destination"},
      {WithBind("/opt", "/devices"), nullptr, ""},  // a sibling of /dev, not under it
      {WithBind("/opt", "/ws/sub"), nullptr, ""},
      {hide_proc, "is under /proc", "fs.hide[0]"},
      {hide_rel, "is not an absolute path", "fs.hide[0]"},
      {hide_ok, nullptr, ""},
  };
  for (const Row& row : rows) {
    auto err = ValidateFsView(row.view, "/ws");
    std::string what = row.view.binds.empty()
                           ? row.view.hides[0]
                           : row.view.binds[0].source + ":" + row.view.binds[0].destination;
    if (!row.message) {
      EXPECT_FALSE(err) << what << ": " << err->message;
      continue;
    }
    ASSERT_TRUE(err) << what;
    EXPECT_THAT(err->message, HasSubstr(row.message)) << what;
    EXPECT_EQ(err->field, row.field) << what;
  }
}

TEST(FsViewTest, TheFlagIsNamedInTheMessage) {
  FsView v;
  v.binds = {{"/a", "/a", true}, {"/b", "/proc/x", false}};
  auto err = ValidateFsView(v, "/ws");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->message, "--bind destination \"/proc/x\" is under /proc");
  EXPECT_EQ(err->field, "fs.binds[1].destination");
}

TEST(FsViewTest, MountSourceOfFollowsTheLastBindThatHoldsThePath) {
  std::vector<FsBind> binds = {{"/srv/a", "/data", true}, {"/srv/b", "/data/sub", true}};
  EXPECT_EQ(MountSourceOf(binds, "/data/x"), "/srv/a/x");
  EXPECT_EQ(MountSourceOf(binds, "/data/sub/y"), "/srv/b/y");
  EXPECT_EQ(MountSourceOf(binds, "/data"), "/srv/a");
  EXPECT_EQ(MountSourceOf(binds, "/database"), "/database");
  EXPECT_EQ(MountSourceOf(binds, "/etc/x"), "/etc/x");
}

TEST(FsViewTest, PathContains) {
  EXPECT_TRUE(PathContains("/a", "/a"));
  EXPECT_TRUE(PathContains("/a", "/a/b"));
  EXPECT_FALSE(PathContains("/a", "/ab"));
  EXPECT_TRUE(PathContains("/", "/x"));
  EXPECT_FALSE(PathContains("", "/x"));
}

class FsViewHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_EQ(::mkdir((dir_.path() + "/state").c_str(), 0700), 0);
    ASSERT_EQ(::mkdir((dir_.path() + "/state/runs").c_str(), 0700), 0);
    ASSERT_EQ(::mkdir((dir_.path() + "/tools").c_str(), 0755), 0);
    ASSERT_EQ(::symlink("tools", (dir_.path() + "/link").c_str()), 0);
  }
  std::optional<FsViewError> Check(FsView v) { return CheckFsViewOnHost(v, state()); }
  std::string state() const { return dir_.path() + "/state"; }
  TempDir dir_{"fs-view-test"};
};

TEST_F(FsViewHostTest, AnExistingSourceIsAccepted) {
  EXPECT_FALSE(Check(WithBind(dir_.path() + "/tools", "/opt/tools")));
}

TEST_F(FsViewHostTest, AMissingSourceIsRefusedWithTheReason) {
  auto err = Check(WithBind(dir_.path() + "/nope", "/x"));
  ASSERT_TRUE(err);
  EXPECT_THAT(err->message, HasSubstr("No such file or directory"));
  EXPECT_EQ(err->field, "fs.binds[0].source");
}

TEST_F(FsViewHostTest, ASymlinkedSourceIsRefused) {
  auto err = Check(WithBind(dir_.path() + "/link", "/x"));
  ASSERT_TRUE(err);
  EXPECT_THAT(err->message, HasSubstr("a symlink on the path"));
}

// The state dir holds every run's records and logs: not inside it, not it, not a parent of it.
TEST_F(FsViewHostTest, TheStateDirCannotBeBound) {
  for (const std::string& src : {state(), state() + "/runs", dir_.path()}) {
    auto err = Check(WithBind(src, "/x"));
    ASSERT_TRUE(err) << src;
    EXPECT_THAT(err->message, HasSubstr("state dir")) << src;
  }
}

TEST_F(FsViewHostTest, AHideMustExistInTheViewLookedUpThroughTheBinds) {
  FsView v = WithBind(dir_.path() + "/tools", "/opt/tools");
  v.hides = {"/opt/tools/missing"};
  auto err = Check(v);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->field, "fs.hide[0]");
  ASSERT_EQ(::mkdir((dir_.path() + "/tools/missing").c_str(), 0755), 0);
  EXPECT_FALSE(Check(v));
}

}  // namespace
}  // namespace codespace
