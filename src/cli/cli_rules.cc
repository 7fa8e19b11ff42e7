#include "cli/cli_rules.h"

#include <fmt/format.h>

namespace codespace {

std::string EffectiveEgress(std::string_view given, const std::vector<std::string>& allow) {
  if (!given.empty()) return std::string(given);
  return allow.empty() ? "none" : "allowlist";
}

std::string UnexpectedArgumentsMessage(std::string_view command, bool top_level,
                                       const std::vector<std::string>& remaining) {
  std::string help = fmt::format("see `{} --help`", command);
  for (const auto& a : remaining) {
    if (a != "--" && a.size() > 1 && a[0] == '-') {
      return fmt::format("{}: unknown flag {}; {}", command, a, help);
    }
  }
  for (const auto& a : remaining) {
    if (a == "--") continue;
    if (top_level) return fmt::format("{}: unknown command \"{}\"; {}", command, a, help);
    return fmt::format(
        "{}: unexpected argument \"{}\" (a command to run goes after --, and only where the "
        "subcommand takes one); {}",
        command, a, help);
  }
  return fmt::format("{}: unexpected arguments; {}", command, help);
}

Result<std::vector<std::string>> ParseEnvFile(std::string_view text, std::string_view name) {
  std::vector<std::string> out;
  size_t line_no = 0;
  for (size_t at = 0; at <= text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(at, nl - at);
    at = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return InvalidArgumentError(
          fmt::format("--env-file {}: line {}: expected KEY=VALUE", name, line_no));
    }
    out.emplace_back(line);
  }
  return out;
}

std::string OneLine(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f)
          out += fmt::format("\\x{:02x}", c);
        else
          out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace codespace
