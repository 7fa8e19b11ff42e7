// `codespace show`: the setup time is shown when the record has one, and only then.
#include "cli/record_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace codespace {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

RunRecord Ended() {
  RunRecord r;
  r.id = "0123456789abcdef";
  r.spec.argv = {"true"};
  r.spec.workspace = "/w";
  r.state = RunState::kExited;
  r.exit_code = 0;
  r.created_ms = 1000;
  r.started_ms = 1000;
  r.ended_ms = 1050;
  return r;
}

TEST(RecordFormatTest, SetupTimeShownWhenMeasured) {
  RunRecord r = Ended();
  r.setup_ms = 12;
  EXPECT_THAT(FormatRecord(r),
              HasSubstr("\nsetup:     12 ms (sandbox and network, until the command ran)\n"));
}

TEST(RecordFormatTest, NoSetupLineForARunThatNeverStarted) {
  RunRecord r = Ended();
  r.state = RunState::kAborted;
  r.exit_code.reset();
  EXPECT_THAT(FormatRecord(r), Not(HasSubstr("setup:")));
}

// The file-system view the run asked for (docs/view.md), each bind and hide.
TEST(RecordFormatTest, ViewLine) {
  RunRecord r = Ended();
  EXPECT_THAT(FormatRecord(r), HasSubstr("\nview:      default\n"));
  r.spec.fs.binds = {{"/opt/a", "/opt/a", true}, {"/srv/d", "/data", false}};
  r.spec.fs.hides = {"/opt/a/.env"};
  EXPECT_THAT(
      FormatRecord(r),
      HasSubstr("\nview:      default; ro-bind /opt/a; bind /srv/d:/data; hide /opt/a/.env\n"));
  r.spec.fs = FsView{FsViewKind::kHost, {}, {}};
  EXPECT_THAT(FormatRecord(r), HasSubstr("\nview:      host\n"));
}

}  // namespace
}  // namespace codespace
