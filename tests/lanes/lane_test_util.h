// Shared bits of the lane tests.
#pragma once

#include <unistd.h>

#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/file_util.h"
#include "harness/lane_env.h"

namespace codespace::lanes {

// Lanes stage uids and mounts: they need root. On the project's machines and CI they run.
#define REQUIRE_ROOT_FOR_LANES()                                                         \
  do {                                                                                   \
    if (::geteuid() != 0) GTEST_SKIP() << "lane tests stage uids and mounts: need root"; \
  } while (0)

// Field `index` of /proc/PID/stat, numbered as proc(5) numbers them (3: state, 4: parent,
// 7: controlling terminal); empty when the process is gone.
inline std::string ProcStatField(pid_t pid, int index) {
  auto stat = ReadFileToString("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return "";
  size_t close = stat->rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(stat->substr(close + 2));
  std::string field;
  for (int i = 3; i <= index; ++i) {
    if (!(rest >> field)) return "";
  }
  return field;
}

inline std::string Describe(const CliResult& r) {
  return "exit " + std::to_string(r.code()) + ", output:\n" + r.output;
}

}  // namespace codespace::lanes
