#include "config/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <set>

namespace codespace {
namespace {

using ::testing::HasSubstr;

TEST(ConfigTest, DefaultsWhenNothingSetsThem) {
  Config c = Config::FromLayers({});
  EXPECT_EQ(c.Get("drain_grace_ms"), "5000");
  EXPECT_EQ(c.SourceOf("drain_grace_ms"), ConfigSource::kDefault);
  EXPECT_EQ(c.Get("pool_v4"), "10.201.0.0/16");
  EXPECT_EQ(c.settings().size(), SettingDefs().size());
}

TEST(ConfigTest, LaterLayersWinAndSayWhereTheValueCameFrom) {
  const ConfigLayer layers[] = {
      {ConfigSource::kFile, {{"stop_grace_ms", "100"}, {"worker_poll_ms", "7"}}},
      {ConfigSource::kEnvironment, {{"stop_grace_ms", "200"}, {"no_such_setting", "x"}}},
  };
  Config c = Config::FromLayers(layers);
  EXPECT_EQ(c.Get("stop_grace_ms"), "200");
  EXPECT_EQ(c.SourceOf("stop_grace_ms"), ConfigSource::kEnvironment);
  EXPECT_EQ(c.Get("worker_poll_ms"), "7");
  EXPECT_EQ(c.SourceOf("worker_poll_ms"), ConfigSource::kFile);
  EXPECT_EQ(c.SourceOf("drain_grace_ms"), ConfigSource::kDefault);
}

TEST(ConfigTest, LoadReadsEachSettingsVariable) {
  ::setenv("CODESPACE_DNS_UPSTREAM", "192.0.2.53#5353", 1);
  ::setenv("CODESPACE_API_GROUP", "", 1);  // set, if empty: still the environment's
  Config c = Config::Load();
  ::unsetenv("CODESPACE_DNS_UPSTREAM");
  ::unsetenv("CODESPACE_API_GROUP");
  EXPECT_EQ(c.Get("dns_upstream"), "192.0.2.53#5353");
  EXPECT_EQ(c.SourceOf("dns_upstream"), ConfigSource::kEnvironment);
  EXPECT_EQ(c.SourceOf("api_group"), ConfigSource::kEnvironment);
  EXPECT_EQ(c.SourceOf("pool_v6"), ConfigSource::kDefault);
}

TEST(ConfigTest, TheTableHasOneRowPerNameAndVariable) {
  std::set<std::string_view> names, envs;
  for (const SettingDef& d : SettingDefs()) {
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    EXPECT_TRUE(envs.insert(d.env).second) << d.env;
    EXPECT_EQ(d.env.substr(0, 10), "CODESPACE_") << d.env;
    EXPECT_FALSE(d.what.empty()) << d.name;
  }
}

TEST(ConfigTest, PrintsEverySettingWithValueAndSource) {
  const ConfigLayer layers[] = {{ConfigSource::kEnvironment, {{"stop_grace_ms", "100"}}}};
  Config c = Config::FromLayers(layers);
  std::string text = c.ToText();
  EXPECT_THAT(text, HasSubstr("stop_grace_ms"));
  EXPECT_THAT(text, HasSubstr("100"));
  EXPECT_THAT(text, HasSubstr("env"));
  EXPECT_THAT(text, HasSubstr("CODESPACE_STOP_GRACE_MS"));
  auto j = nlohmann::json::parse(c.ToJson());
  ASSERT_EQ(j.size(), SettingDefs().size());
  bool found = false;
  for (const auto& s : j) {
    if (s["name"] == "stop_grace_ms") {
      found = true;
      EXPECT_EQ(s["value"], "100");
      EXPECT_EQ(s["source"], "env");
      EXPECT_EQ(s["default"], "5000");
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace codespace
