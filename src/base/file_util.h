// Small file helpers with Status errors that name the call and path.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace codespace {

Result<std::string> ReadFileToString(const std::string& path);

// Writes `contents` to `path` durably: write a temporary file beside it, fsync it, rename it over
// `path`, fsync the directory. A crash leaves either the old file or the new one, never a torn
// one (see WriteFileAtomically's comments for why each fsync is there).
Status WriteFileAtomically(const std::string& path, std::string_view contents, unsigned mode = 0644);

// Replaces `path` atomically for readers (temporary file + rename) but without any fsync: for
// files that describe this boot only (process identities, probe caches), which a crash makes
// meaningless anyway. Readers never see a torn file; after a power loss it may be old or gone.
Status ReplaceFileForThisBoot(const std::string& path, std::string_view contents,
                              unsigned mode = 0644);

// mkdir -p with `mode` for the directories it creates.
Status MakeDirs(const std::string& path, unsigned mode = 0755);

// Removes a directory tree; missing is fine. Does not follow symlinks.
Status RemoveTree(const std::string& path);

// Searches `path_env` (a colon-separated PATH) for an executable named `name`. A name that
// contains a slash is checked as given. Returns the first executable regular file found.
Result<std::string> FindExecutable(std::string_view name, std::string_view path_env);

// The value of an environment variable, or `fallback` when unset.
std::string GetEnv(const char* name, std::string_view fallback = "");

}  // namespace codespace
