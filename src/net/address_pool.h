// The addresses of filtered runs: a configurable pool cut into one slot per run. Pure.
//
// IPv4: the pool (default 10.201.0.0/16) in /30s — .1 the worker side of the run's veth (also
// where its DNS gate listens), .2 the run. IPv6 (where the worker has it): the pool (default
// fd63:6373:7061::/48) in /64s — ::1 the worker side, ::2 the run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "net/rtnetlink.h"

namespace codespace {

struct AddressPool {
  IpAddress v4_base;
  int v4_prefix = 16;
  IpAddress v6_base;
  int v6_prefix = 48;

  // "10.201.0.0/16" and "fd63:6373:7061::/48" (CODESPACE_POOL_V4 / CODESPACE_POOL_V6).
  static Result<AddressPool> Parse(const std::string& v4_cidr, const std::string& v6_cidr);
  static AddressPool Default();

  uint32_t slot_count() const;  // how many runs fit at once (IPv4 decides)
  std::string v4_cidr() const;
  std::string v6_cidr() const;
};

struct RunAddresses {
  uint32_t slot = 0;
  IpAddress worker_v4, run_v4;  // /30
  IpAddress worker_v6, run_v6;  // /64
  static constexpr int kV4Prefix = 30;
  static constexpr int kV6Prefix = 64;
};

RunAddresses AddressesForSlot(const AddressPool& pool, uint32_t slot);

// The slot an address (worker or run side) belongs to, or -1 when it is outside the pool.
int64_t SlotOfAddress(const AddressPool& pool, const IpAddress& address);

// The first free slot, searching from `preferred` (a hash of the run id, so concurrent runs
// rarely contend) around the pool. kUnavailable when every slot is taken.
Result<uint32_t> PickFreeSlot(const AddressPool& pool, const std::vector<uint32_t>& taken,
                              uint32_t preferred);

}  // namespace codespace
