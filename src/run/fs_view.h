// FsView: the file-system view a run asks for — part of its spec, recorded with it.
//
//   default  the system's programs and libraries read-only, /etc with its secrets masked, /proc
//            (its host-wide settings read-only) and a minimal /dev, private /tmp, /var/tmp,
//            /run and HOME, the workspace read-write, plus exactly `binds` and `hides`
//            (sandbox/mount_list.h turns this into mounts; docs/view.md says why each).
//   host     the whole host read-only (`--ro-bind / /`), the worker's state dir hidden, /etc's
//            secrets masked and /proc's settings read-only: an explicit, recorded choice.
//
// The rules a view must pass are one function for the CLI and the API (ValidateFsView, pure;
// CheckFsViewOnHost, what only the host can say), so both refuse the same view with the same
// words before anything is spent.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace codespace {

enum class FsViewKind { kDefault, kHost };
std::string_view FsViewKindName(FsViewKind kind);  // "default", "host"
Result<FsViewKind> ParseFsViewKind(std::string_view text);

// A host path bound into the run: `source` on the host at `destination` inside.
struct FsBind {
  std::string source;
  std::string destination;
  bool read_only = true;
  friend bool operator==(const FsBind&, const FsBind&) = default;
};

struct FsView {
  FsViewKind kind = FsViewKind::kDefault;
  std::vector<FsBind> binds;  // in order: a later bind lies over an earlier one
  // Paths inside the run masked: an empty read-only directory over a directory, /dev/null
  // (read-only) over anything else. Applied after every bind, so a mask always wins.
  std::vector<std::string> hides;
  bool is_default() const { return kind == FsViewKind::kDefault && binds.empty() && hides.empty(); }
  friend bool operator==(const FsView&, const FsView&) = default;
};

// "SRC" or "SRC:DST" (the --ro-bind / --bind flag's value). Only the split: ValidateFsView
// judges the paths.
FsBind ParseBindFlag(std::string_view value, bool read_only);

// What is wrong with a view, naming the field ("fs.binds[1].destination", "fs.hide[0]") the
// way the API reports it; the CLI prints `message`, which names the flag's value.
struct FsViewError {
  std::string message;
  std::string field;
};

// Pure. Every path absolute and normalised (no "." / ".." / empty components, no trailing '/',
// no NUL); no bind destination or hide at "/", under /proc or /dev (the kernel's and the
// sandbox's own file systems: codespace-init and the broker socket live in /dev); no bind
// destination over the workspace itself (the workspace is the run's, read-write).
std::optional<FsViewError> ValidateFsView(const FsView& view, std::string_view workspace);

// What only the host can say: each bind source exists and is the path it names (no symlink on
// it: the path given is the path bound); no bind source is the worker's state dir, inside it, or
// holds it (it holds every run's records and logs); each hide names something that exists in
// the view (it is looked up on the host through the binds: MountSourceOf). `state_dir` empty:
// not checked.
std::optional<FsViewError> CheckFsViewOnHost(const FsView& view, const std::string& state_dir);

// Both, in that order: what the CLI calls (the API calls each at its own step).
std::optional<FsViewError> CheckFsView(const FsView& view, std::string_view workspace,
                                       const std::string& state_dir);

// `dir` is `path` or one of its ancestors (both absolute and normalised).
bool PathContains(std::string_view dir, std::string_view path);

// The host path that shows at `path` inside a run with these binds: through the last bind
// whose destination holds it, else `path` itself.
std::string MountSourceOf(const std::vector<FsBind>& binds, const std::string& path);

}  // namespace codespace
