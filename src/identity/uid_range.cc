#include "identity/uid_range.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>

#include "base/file_util.h"

namespace codespace {

std::string UidRange::ToString() const { return fmt::format("{}-{}", first, last()); }

namespace {

bool ParseId(std::string_view s, uint32_t* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

Result<UidRange> ParseUidRange(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError(fmt::format("{}=\"{}\": {} (expected FIRST-LAST, e.g. {})",
                                            kRunUidsEnv, text, why, kDefaultRunUids));
  };
  size_t dash = text.find('-');
  uint32_t first = 0, last = 0;
  if (dash == std::string_view::npos || !ParseId(text.substr(0, dash), &first) ||
      !ParseId(text.substr(dash + 1), &last)) {
    return bad("not a range of two numbers");
  }
  if (first == 0) return bad("uid 0 is root");
  if (last < first) return bad("the last id is below the first");
  if (last == UINT32_MAX) return bad("4294967295 is (uid_t)-1, which means \"no id\"");
  if (first <= 65535 && last >= 65535) return bad("65535 is the 16-bit \"no id\"");
  return UidRange{first, last - first + 1};
}

Status CheckRangeFree(const UidRange& range, const std::vector<AccountId>& users,
                      const std::vector<AccountId>& groups) {
  for (const auto& [kind, list] : {std::pair{"user", &users}, std::pair{"group", &groups}}) {
    for (const AccountId& a : *list) {
      if (!range.Contains(a.id)) continue;
      return FailedPreconditionError(fmt::format(
          "{}={} overlaps the {} \"{}\" (id {}): a run leased that id would own its files; "
          "choose a range no account uses",
          kRunUidsEnv, range.ToString(), kind, a.name, a.id));
    }
  }
  return OkStatus();
}

void AccountIds(std::vector<AccountId>* users, std::vector<AccountId>* groups) {
  ::setpwent();
  while (passwd* p = ::getpwent()) users->push_back({p->pw_name, p->pw_uid});
  ::endpwent();
  ::setgrent();
  while (group* g = ::getgrent()) groups->push_back({g->gr_name, g->gr_gid});
  ::endgrent();
}

bool RangeIsMapped(const UidRange& range, std::string_view id_map) {
  size_t at = 0;
  while (at < id_map.size()) {
    size_t end = id_map.find('\n', at);
    if (end == std::string_view::npos) end = id_map.size();
    std::string_view line = id_map.substr(at, end - at);
    at = end + 1;
    uint64_t v[3] = {0, 0, 0};
    size_t pos = 0;
    int got = 0;
    for (; got < 3; ++got) {
      while (pos < line.size() && line[pos] == ' ') ++pos;
      const char* b = line.data() + pos;
      auto [p, ec] = std::from_chars(b, line.data() + line.size(), v[got]);
      if (ec != std::errc()) break;
      pos += static_cast<size_t>(p - b);
    }
    if (got == 3 && range.first >= v[0] && uint64_t{range.last()} < v[0] + v[2]) return true;
  }
  return false;
}

bool PerRunIdentityHere() {
  if (::geteuid() != 0) return false;
  auto range = ParseUidRange(GetEnv(kRunUidsEnv, kDefaultRunUids));
  if (!range.ok()) return true;
  auto uid_map = ReadFileToString("/proc/self/uid_map");
  auto gid_map = ReadFileToString("/proc/self/gid_map");
  return uid_map.ok() && gid_map.ok() && RangeIsMapped(*range, *uid_map) &&
         RangeIsMapped(*range, *gid_map);
}

std::string PerRunIdentityCapabilityError() {
  auto status = ReadFileToString("/proc/self/status");
  if (!status.ok()) return status.status().message();
  size_t at = status->find("CapEff:");
  if (at == std::string::npos) return "/proc/self/status has no CapEff line";
  const uint64_t eff = std::strtoull(status->c_str() + at + 7, nullptr, 16);
  // CAP_SETGID (6), CAP_SETUID (7): the drop to the leased uid; CAP_SYS_ADMIN (21): the
  // idmapped workspace (open_tree, mount_setattr, move_mount).
  for (auto [bit, name] :
       {std::pair{6, "CAP_SETGID"}, std::pair{7, "CAP_SETUID"}, std::pair{21, "CAP_SYS_ADMIN"}}) {
    if (!(eff >> bit & 1)) {
      return fmt::format(
          "uid 0 without {} (a container's root?) cannot give its runs a uid of their own and an "
          "idmapped workspace; run the worker as an unprivileged user (its runs keep its uid), or "
          "grant it CAP_SETUID, CAP_SETGID and CAP_SYS_ADMIN",
          name);
    }
  }
  return "";
}

Result<UidRange> RunUidRangeFromEnvironment() {
  ASSIGN_OR_RETURN(UidRange range, ParseUidRange(GetEnv(kRunUidsEnv, kDefaultRunUids)));
  std::vector<AccountId> users, groups;
  AccountIds(&users, &groups);
  RETURN_IF_ERROR(CheckRangeFree(range, users, groups));
  return range;
}

}  // namespace codespace
