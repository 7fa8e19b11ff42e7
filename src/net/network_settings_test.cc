#include "net/network_settings.h"

#include <gtest/gtest.h>

namespace codespace {
namespace {

// config.cc's defaults for the pool are AddressPool::Default(): one pool, whoever reads it.
TEST(NetworkSettingsTest, ConfigDefaultsAreTheDefaultPool) {
  auto s = NetworkSettingsFrom(Config::FromLayers({}));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->pool.v4_cidr(), AddressPool::Default().v4_cidr());
  EXPECT_EQ(s->pool.v6_cidr(), AddressPool::Default().v6_cidr());
  EXPECT_EQ(s->upstream_dns, "");
}

TEST(NetworkSettingsTest, ABadPoolIsAnError) {
  const ConfigLayer layers[] = {{ConfigSource::kEnvironment, {{"pool_v4", "10.0.0.0/33"}}}};
  EXPECT_FALSE(NetworkSettingsFrom(Config::FromLayers(layers)).ok());
}

}  // namespace
}  // namespace codespace
