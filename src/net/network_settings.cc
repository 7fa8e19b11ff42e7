#include "net/network_settings.h"

#include "base/file_util.h"

namespace codespace {

Result<NetworkSettings> NetworkSettingsFromEnvironment() {
  NetworkSettings s;
  std::string v4 = GetEnv("CODESPACE_POOL_V4", s.pool.v4_cidr());
  std::string v6 = GetEnv("CODESPACE_POOL_V6", s.pool.v6_cidr());
  ASSIGN_OR_RETURN(s.pool, AddressPool::Parse(v4, v6));
  s.upstream_dns = GetEnv("CODESPACE_DNS_UPSTREAM", s.upstream_dns);
  return s;
}

}  // namespace codespace
