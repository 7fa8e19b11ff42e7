#include "policy/public_suffix.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace codespace {

PublicSuffixList PublicSuffixList::Parse(std::string_view text) {
  PublicSuffixList l;
  bool icann = false;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(at, nl - at);
    at = nl + 1;
    if (line.find("===BEGIN ICANN DOMAINS===") != std::string_view::npos) icann = true;
    if (line.find("===END ICANN DOMAINS===") != std::string_view::npos) icann = false;
    // A rule is the line's first word; comments start with "//".
    size_t end = line.find_first_of(" \t\r");
    line = line.substr(0, end);
    if (!icann || line.empty() || line.substr(0, 2) == "//") continue;
    std::string rule;
    for (char c : line) rule += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (rule[0] == '!') {
      l.exceptions_.insert(rule.substr(1));
    } else if (rule.size() > 2 && rule.compare(0, 2, "*.") == 0) {
      l.wildcards_.insert(rule.substr(2));
    } else {
      l.rules_.insert(rule);
    }
  }
  return l;
}

bool PublicSuffixList::IsPublicSuffix(std::string_view name) const {
  if (name.empty()) return false;
  std::string n(name);
  if (n.find('.') == std::string::npos) return true;  // a TLD, listed or not
  if (rules_.count(n)) return true;
  if (exceptions_.count(n)) return false;
  size_t dot = n.find('.');
  return wildcards_.count(n.substr(dot + 1)) > 0;
}

Status CheckWildcardNotPublicSuffix(const AllowlistEntry& entry, const PublicSuffixList& list) {
  if (entry.kind != AllowlistEntry::Kind::kWildcardHostName) return OkStatus();
  if (!list.IsPublicSuffix(entry.host)) return OkStatus();
  return InvalidArgumentError(fmt::format(
      "allowlist entry \"*.{0}\": \"{0}\" is a public suffix, so the wildcard would allow every "
      "site anyone registers under it; list the hosts meant (e.g. api.example.{0}) or a "
      "wildcard under a registered domain (*.example.{0})",
      entry.host));
}

const PublicSuffixList& SystemPublicSuffixList() {
  static const PublicSuffixList list = [] {
    std::ifstream in(kPublicSuffixListPath);
    std::stringstream text;
    if (in) text << in.rdbuf();
    return PublicSuffixList::Parse(text.str());
  }();
  return list;
}

}  // namespace codespace
