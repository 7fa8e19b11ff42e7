// NetworkSettings: the host-wide settings a filtered run's network is made from — the address
// pool its veth pairs are cut from and the resolver its DNS gate forwards to. Read by the
// process that launches runs (the supervisor), the same way by every one of them.
#pragma once

#include <string>

#include "base/status.h"
#include "config/config.h"
#include "net/address_pool.h"

namespace codespace {

struct NetworkSettings {
  AddressPool pool = AddressPool::Default();  // CODESPACE_POOL_V4 / CODESPACE_POOL_V6
  std::string
      upstream_dns;  // CODESPACE_DNS_UPSTREAM ("ADDRESS" or "ADDRESS#PORT"); empty: resolv.conf
};

// The settings a Config gives (pool_v4, pool_v6, dns_upstream); an unparsable pool is an error.
[[nodiscard]] Result<NetworkSettings> NetworkSettingsFrom(const Config& config);
// The same from Config::Load(): for a process that was handed no Config (an exec'd supervisor).
[[nodiscard]] Result<NetworkSettings> NetworkSettingsFromEnvironment();

}  // namespace codespace
