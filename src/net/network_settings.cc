#include "net/network_settings.h"

namespace codespace {

Result<NetworkSettings> NetworkSettingsFrom(const Config& config) {
  NetworkSettings s;
  ASSIGN_OR_RETURN(s.pool, AddressPool::Parse(config.Get("pool_v4"), config.Get("pool_v6")));
  s.upstream_dns = config.Get("dns_upstream");
  return s;
}

Result<NetworkSettings> NetworkSettingsFromEnvironment() {
  return NetworkSettingsFrom(Config::Load());
}

}  // namespace codespace
