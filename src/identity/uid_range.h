// The host uids a root worker leases to its runs: one range, configured (CODESPACE_RUN_UIDS,
// "FIRST-LAST"), that no account of the host uses. Uid N is leased with gid N.
//
// Parsing and the overlap check are pure (tested by tables); AccountIds() reads the account
// databases (getpwent/getgrent, so NSS sources such as LDAP count too).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace codespace {

inline constexpr char kRunUidsEnv[] = "CODESPACE_RUN_UIDS";
// Far above the ids Debian hands out (system < 1000, users < 60000, 65534 nobody) and below
// the 65536-id blocks /etc/subuid usually starts at (100000 per user, but only as
// subordinate ids of other users' namespaces, never as host processes).
inline constexpr char kDefaultRunUids[] = "600000-665535";

struct UidRange {
  uint32_t first = 0;
  uint32_t count = 0;
  uint32_t last() const { return first + count - 1; }
  bool Contains(uint32_t id) const { return id >= first && id - first < count; }
  std::string ToString() const;
  friend bool operator==(const UidRange&, const UidRange&) = default;
};

// "FIRST-LAST" (inclusive). Refuses uid 0 and the ids the kernel reserves ((uid_t)-1, and
// (uint16_t)-1, the old 16-bit "no id"), an empty or reversed range.
Result<UidRange> ParseUidRange(std::string_view text);

// One account (a user or a group) by name and id.
struct AccountId {
  std::string name;
  uint32_t id = 0;
};

// OK when no user's uid and no group's gid falls in `range`; otherwise FailedPrecondition
// naming the first that does (a run leased that id would own its files, or be in its group).
Status CheckRangeFree(const UidRange& range, const std::vector<AccountId>& users,
                      const std::vector<AccountId>& groups);

// Every user and every group the host knows (getpwent, getgrent).
void AccountIds(std::vector<AccountId>* users, std::vector<AccountId>* groups);

// Whether every id of `range` is mapped in `id_map`, the text of /proc/self/uid_map or gid_map
// ("INSIDE OUTSIDE COUNT" lines).
bool RangeIsMapped(const UidRange& range, std::string_view id_map);

// Whether this process gives each run a uid of its own: it is root, and can become every uid and
// gid of the configured range (the initial user namespace, or one that maps the range). A root of
// a user namespace that does not map it (a rootless container's "root") is an ordinary uid to
// the host, with nothing to hand out: its runs keep its uid, like an unprivileged worker's. A
// range that does not parse counts as per-run, so that its error refuses the worker.
bool PerRunIdentityHere();

// Why this root cannot lease runs their own uids: the capabilities the launch needs (CAP_SETUID,
// CAP_SETGID, CAP_SYS_ADMIN) missing from its effective set, in words; empty when it can. A
// root worker that cannot is refused at start, never left to run its commands as uid 0.
std::string PerRunIdentityCapabilityError();

// The configured range (CODESPACE_RUN_UIDS, else kDefaultRunUids), checked against the host's
// accounts. The error says what to change.
Result<UidRange> RunUidRangeFromEnvironment();

}  // namespace codespace
