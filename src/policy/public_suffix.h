// Public suffixes, against allowlist wildcards that cannot mean what was meant: "*.com" or
// "*.co.uk" would let a run reach every site registered under that suffix, anyone's.
//
// Pure: the list's text is passed in as a value (Debian's `publicsuffix` package has it at
// kPublicSuffixListPath; LoadPublicSuffixList reads it at the edge). Only the ICANN section is
// used: the PRIVATE section lists hosting suffixes (githubusercontent.com, github.io) under which
// a wildcard is exactly what a user means to allow.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>

#include "base/status.h"
#include "policy/egress_policy.h"

namespace codespace {

inline constexpr char kPublicSuffixListPath[] = "/usr/share/publicsuffix/public_suffix_list.dat";

class PublicSuffixList {
 public:
  // The ICANN rules of a list in the publicsuffix.org format ("//" comments, "*." wildcards,
  // "!" exceptions). An empty text gives a list that knows no suffix (single labels are still
  // refused: every TLD is a public suffix).
  static PublicSuffixList Parse(std::string_view text);

  // Whether `name` (lower-case, no trailing dot) is a public suffix: a rule names it, or a
  // wildcard rule covers it and no exception does; any single label is.
  bool IsPublicSuffix(std::string_view name) const;
  size_t size() const { return rules_.size() + wildcards_.size(); }

 private:
  std::unordered_set<std::string> rules_, wildcards_, exceptions_;  // wildcards_: after "*."
};

// Refuses a wildcard entry whose suffix is a public suffix, with a reason an operator can act
// on; every other entry passes.
Status CheckWildcardNotPublicSuffix(const AllowlistEntry& entry, const PublicSuffixList& list);

// The edge: the system's list (kPublicSuffixListPath), read once per process. Missing or
// unreadable: an empty list (single-label wildcards are still refused).
const PublicSuffixList& SystemPublicSuffixList();

}  // namespace codespace
