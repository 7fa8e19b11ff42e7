#include "identity/uid_range.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>

#include <charconv>

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

Result<UidRange> RunUidRangeFromEnvironment() {
  ASSIGN_OR_RETURN(UidRange range, ParseUidRange(GetEnv(kRunUidsEnv, kDefaultRunUids)));
  std::vector<AccountId> users, groups;
  AccountIds(&users, &groups);
  RETURN_IF_ERROR(CheckRangeFree(range, users, groups));
  return range;
}

}  // namespace codespace
