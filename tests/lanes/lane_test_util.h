// Shared bits of the lane tests.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "harness/lane_env.h"

namespace codespace::lanes {

// Lanes stage uids and mounts: they need root. On the project's machines and CI they run.
#define REQUIRE_ROOT_FOR_LANES()                                                         \
  do {                                                                                   \
    if (::geteuid() != 0) GTEST_SKIP() << "lane tests stage uids and mounts: need root"; \
  } while (0)

inline std::string Describe(const CliResult& r) {
  return "exit " + std::to_string(r.code()) + ", output:\n" + r.output;
}

}  // namespace codespace::lanes
