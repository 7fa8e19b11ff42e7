#include "net/address_pool.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace codespace {

namespace {

Result<std::pair<IpAddress, int>> ParseCidr(const std::string& text, int family) {
  size_t slash = text.find('/');
  if (slash == std::string::npos) return InvalidArgumentError(fmt::format("\"{}\": expected ADDRESS/PREFIX", text));
  ASSIGN_OR_RETURN(IpAddress a, ParseIpAddress(text.substr(0, slash)));
  if (a.family != family) {
    return InvalidArgumentError(fmt::format("\"{}\": expected an {} pool", text,
                                            family == AF_INET ? "IPv4" : "IPv6"));
  }
  int prefix = 0;
  try {
    prefix = std::stoi(text.substr(slash + 1));
  } catch (...) {
    return InvalidArgumentError(fmt::format("\"{}\": bad prefix", text));
  }
  return std::make_pair(a, prefix);
}

uint32_t V4(const IpAddress& a) {
  return (uint32_t{a.bytes[0]} << 24) | (uint32_t{a.bytes[1]} << 16) |
         (uint32_t{a.bytes[2]} << 8) | uint32_t{a.bytes[3]};
}

IpAddress FromV4(uint32_t v) {
  IpAddress a;
  a.family = AF_INET;
  a.bytes[0] = static_cast<uint8_t>(v >> 24);
  a.bytes[1] = static_cast<uint8_t>(v >> 16);
  a.bytes[2] = static_cast<uint8_t>(v >> 8);
  a.bytes[3] = static_cast<uint8_t>(v);
  return a;
}

}  // namespace

Result<AddressPool> AddressPool::Parse(const std::string& v4_cidr, const std::string& v6_cidr) {
  AddressPool p;
  ASSIGN_OR_RETURN(auto v4, ParseCidr(v4_cidr, AF_INET));
  ASSIGN_OR_RETURN(auto v6, ParseCidr(v6_cidr, AF_INET6));
  if (v4.second < 8 || v4.second > 28) {
    return InvalidArgumentError(fmt::format("IPv4 pool \"{}\": prefix must be 8-28", v4_cidr));
  }
  if (v6.second < 16 || v6.second > 56) {
    return InvalidArgumentError(fmt::format("IPv6 pool \"{}\": prefix must be 16-56", v6_cidr));
  }
  p.v4_prefix = v4.second;
  p.v4_base = FromV4(V4(v4.first) & (v4.second == 0 ? 0 : ~0u << (32 - v4.second)));
  p.v6_prefix = v6.second;
  p.v6_base = v6.first;
  for (int bit = v6.second; bit < 128; ++bit) {
    p.v6_base.bytes[bit / 8] = static_cast<uint8_t>(p.v6_base.bytes[bit / 8] & ~(0x80 >> (bit % 8)));
  }
  return p;
}

AddressPool AddressPool::Default() { return *Parse("10.201.0.0/16", "fd63:6373:7061::/48"); }

uint32_t AddressPool::slot_count() const {
  uint32_t v4 = 1u << (30 - v4_prefix);
  // The IPv6 side has 2^(64-prefix) /64s: at least 256 with prefix <= 56.
  uint64_t v6 = uint64_t{1} << std::min(32, 64 - v6_prefix);
  return static_cast<uint32_t>(std::min<uint64_t>(v4, v6));
}

std::string AddressPool::v4_cidr() const { return fmt::format("{}/{}", v4_base.ToString(), v4_prefix); }
std::string AddressPool::v6_cidr() const { return fmt::format("{}/{}", v6_base.ToString(), v6_prefix); }

RunAddresses AddressesForSlot(const AddressPool& pool, uint32_t slot) {
  RunAddresses r;
  r.slot = slot;
  uint32_t net = V4(pool.v4_base) + (slot << 2);
  r.worker_v4 = FromV4(net + 1);
  r.run_v4 = FromV4(net + 2);
  // The slot goes in bits [v6_prefix, 64): the 64-bit network part, big-endian.
  IpAddress v6 = pool.v6_base;
  uint64_t hi = 0;
  for (int i = 0; i < 8; ++i) hi = (hi << 8) | v6.bytes[i];
  hi |= uint64_t{slot};
  for (int i = 7; i >= 0; --i) {
    v6.bytes[i] = static_cast<uint8_t>(hi & 0xff);
    hi >>= 8;
  }
  r.worker_v6 = v6;
  r.worker_v6.bytes[15] = 1;
  r.run_v6 = v6;
  r.run_v6.bytes[15] = 2;
  return r;
}

int64_t SlotOfAddress(const AddressPool& pool, const IpAddress& a) {
  if (a.family == AF_INET) {
    uint32_t base = V4(pool.v4_base);
    uint32_t v = V4(a);
    uint32_t size = 1u << (32 - pool.v4_prefix);
    if (v < base || v - base >= size) return -1;
    return (v - base) >> 2;
  }
  if (a.family == AF_INET6) {
    for (int bit = 0; bit < pool.v6_prefix; ++bit) {
      uint8_t mask = static_cast<uint8_t>(0x80 >> (bit % 8));
      if ((a.bytes[bit / 8] & mask) != (pool.v6_base.bytes[bit / 8] & mask)) return -1;
    }
    uint64_t hi = 0;
    for (int i = 0; i < 8; ++i) hi = (hi << 8) | a.bytes[i];
    uint64_t slot = hi & ((uint64_t{1} << (64 - pool.v6_prefix)) - 1);
    return slot < pool.slot_count() ? static_cast<int64_t>(slot) : -1;
  }
  return -1;
}

Result<uint32_t> PickFreeSlot(const AddressPool& pool, const std::vector<uint32_t>& taken,
                              uint32_t preferred) {
  const uint32_t n = pool.slot_count();
  std::unordered_set<uint32_t> used(taken.begin(), taken.end());
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t s = (preferred + i) % n;
    if (!used.count(s)) return s;
  }
  return UnavailableError(fmt::format("every address slot of the pool {} is taken ({} runs)",
                                      pool.v4_cidr(), n));
}

}  // namespace codespace
