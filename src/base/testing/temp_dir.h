// TempDir: a directory for one test, removed (whole tree) when the test ends, pass or fail.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <string>

#include "base/file_util.h"

namespace codespace {

class TempDir {
 public:
  explicit TempDir(const char* prefix = "codespace-test") {
    std::string tmpl = "/tmp/" + std::string(prefix) + ".XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    if (p) path_ = p;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (!path_.empty()) RemoveTree(path_).IgnoreError();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace codespace
