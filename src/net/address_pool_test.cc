#include "net/address_pool.h"

#include <sys/socket.h>

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;

TEST(AddressPoolTest, DefaultSlotsAreDistinctAndInside) {
  AddressPool p = AddressPool::Default();
  EXPECT_EQ(p.v4_cidr(), "10.201.0.0/16");
  EXPECT_EQ(p.v6_cidr(), "fd63:6373:7061::/48");
  EXPECT_EQ(p.slot_count(), 16384u);
  RunAddresses a0 = AddressesForSlot(p, 0);
  EXPECT_EQ(a0.worker_v4.ToString(), "10.201.0.1");
  EXPECT_EQ(a0.run_v4.ToString(), "10.201.0.2");
  EXPECT_EQ(a0.worker_v6.ToString(), "fd63:6373:7061::1");
  EXPECT_EQ(a0.run_v6.ToString(), "fd63:6373:7061::2");
  RunAddresses a5 = AddressesForSlot(p, 5);
  EXPECT_EQ(a5.worker_v4.ToString(), "10.201.0.21");
  EXPECT_EQ(a5.run_v4.ToString(), "10.201.0.22");
  EXPECT_EQ(a5.worker_v6.ToString(), "fd63:6373:7061:5::1");
  RunAddresses last = AddressesForSlot(p, p.slot_count() - 1);
  EXPECT_EQ(last.run_v4.ToString(), "10.201.255.254");
  std::set<std::string> seen;
  for (uint32_t s = 0; s < p.slot_count(); ++s) {
    RunAddresses a = AddressesForSlot(p, s);
    EXPECT_EQ(SlotOfAddress(p, a.worker_v4), s);
    EXPECT_EQ(SlotOfAddress(p, a.run_v4), s);
    EXPECT_EQ(SlotOfAddress(p, a.worker_v6), s);
    EXPECT_EQ(SlotOfAddress(p, a.run_v6), s);
    EXPECT_TRUE(seen.insert(a.run_v4.ToString()).second);
  }
}

TEST(AddressPoolTest, OutsideThePoolHasNoSlot) {
  AddressPool p = AddressPool::Default();
  for (const char* outside : {"10.202.0.1", "10.200.255.255", "127.0.0.1", "fd63:6373:7062::1",
                              "2001:db8::1"}) {
    EXPECT_EQ(SlotOfAddress(p, *ParseIpAddress(outside)), -1) << outside;
  }
}

TEST(AddressPoolTest, ParseValidatesAndClearsHostBits) {
  auto p = AddressPool::Parse("172.30.5.9/24", "fd00:1:2:3::/56");
  ASSERT_OK(p);
  EXPECT_EQ(p->v4_cidr(), "172.30.5.0/24");
  EXPECT_EQ(p->v6_cidr(), "fd00:1:2::/56");
  EXPECT_EQ(p->slot_count(), 64u);
  EXPECT_THAT(AddressPool::Parse("10.0.0.0/30", "fd00::/48"), StatusHasMessage("prefix must be 8-28"));
  EXPECT_THAT(AddressPool::Parse("fd00::/48", "fd00::/48"), StatusHasMessage("expected an IPv4 pool"));
  EXPECT_THAT(AddressPool::Parse("10.0.0.0", "fd00::/48"), StatusHasMessage("ADDRESS/PREFIX"));
  EXPECT_THAT(AddressPool::Parse("10.0.0.0/16", "fd00::/60"), StatusHasMessage("prefix must be 16-56"));
}

TEST(AddressPoolTest, PickFreeSlotWrapsAndFillsUp) {
  AddressPool p = *AddressPool::Parse("10.9.0.0/28", "fd00::/48");  // 4 slots
  EXPECT_EQ(*PickFreeSlot(p, {}, 2), 2u);
  EXPECT_EQ(*PickFreeSlot(p, {2, 3}, 2), 0u);
  EXPECT_EQ(*PickFreeSlot(p, {0, 2, 3}, 6), 1u);
  EXPECT_THAT(PickFreeSlot(p, {0, 1, 2, 3}, 0), StatusHasMessage("every address slot"));
}

}  // namespace
}  // namespace codespace
