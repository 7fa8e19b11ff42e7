#include "run/run_limits.h"

#include <fmt/format.h>

#include <cctype>

namespace codespace {

namespace {

constexpr uint64_t kMaxBytes = uint64_t{1} << 62;

// "12.345" → integer part and fraction scaled to `scale` (10^digits); false on anything else.
bool ParseDecimal(std::string_view s, uint64_t scale, int max_fraction_digits, uint64_t* whole,
                  uint64_t* fraction) {
  *whole = 0;
  *fraction = 0;
  size_t i = 0;
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
    if (*whole > (kMaxBytes / 10)) return false;
    *whole = *whole * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  if (i == s.size()) return true;
  if (s[i] != '.' || i + 1 == s.size()) return false;
  uint64_t place = scale;
  int digits = 0;
  for (++i; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    if (++digits > max_fraction_digits) return false;
    place /= 10;
    *fraction += static_cast<uint64_t>(s[i] - '0') * place;
  }
  return true;
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view text) {
  std::string_view s = text;
  auto bad = [&] {
    return InvalidArgumentError(fmt::format(
        "\"{}\" is not a size (bytes, or a number with K, M, G or T: \"512M\", \"2G\")", text));
  };
  // Suffix: [KMGT][i][B] or B or nothing.
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b')) s.remove_suffix(1);
  if (!s.empty() && (s.back() == 'i')) s.remove_suffix(1);
  int shift = 0;
  if (!s.empty()) {
    switch (std::toupper(static_cast<unsigned char>(s.back()))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        break;
    }
    if (shift) s.remove_suffix(1);
  }
  uint64_t whole = 0, fraction = 0;
  constexpr uint64_t kScale = 1000000;  // six decimals: exact enough for any suffix
  if (!ParseDecimal(s, kScale, 6, &whole, &fraction)) return bad();
  if (whole > (kMaxBytes >> shift)) {
    return InvalidArgumentError(fmt::format("\"{}\" is too large", text));
  }
  uint64_t bytes = (whole << shift) + ((fraction << shift) / kScale);
  if (shift == 0 && fraction != 0) return bad();  // a fraction of a byte
  if (bytes == 0) return InvalidArgumentError(fmt::format("\"{}\": a size must be above 0", text));
  if (bytes > kMaxBytes) return InvalidArgumentError(fmt::format("\"{}\" is too large", text));
  return bytes;
}

Result<uint64_t> ParseCpus(std::string_view text) {
  uint64_t whole = 0, fraction = 0;
  if (!ParseDecimal(text, 1000, 3, &whole, &fraction) || whole > 100000) {
    return InvalidArgumentError(
        fmt::format("\"{}\" is not a number of CPU cores (e.g. \"1.5\", \"0.5\", \"2\")", text));
  }
  uint64_t millis = whole * 1000 + fraction;
  // cpu.cfs_quota_us has a floor of 1 ms per 100 ms period.
  if (millis < 10) {
    return InvalidArgumentError(fmt::format("\"{}\": at least 0.01 of a core", text));
  }
  return millis;
}

Result<uint64_t> ParseCount(std::string_view text) {
  uint64_t whole = 0, fraction = 0;
  if (!ParseDecimal(text, 1, 0, &whole, &fraction) || whole == 0 || whole > (uint64_t{1} << 31)) {
    return InvalidArgumentError(fmt::format("\"{}\" is not a positive whole number", text));
  }
  return whole;
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  int unit = -1;
  double v = static_cast<double>(bytes);
  while (unit < 3 && v >= 1024) {
    v /= 1024;
    ++unit;
  }
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return fmt::format("{} {}", s, kUnits[unit]);
}

std::string FormatCpus(uint64_t millis) {
  std::string s = fmt::format("{}.{:03}", millis / 1000, millis % 1000);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string DescribeLimits(const RunLimits& l) {
  std::string out;
  auto add = [&](std::string part) { out += (out.empty() ? "" : " ") + part; };
  if (l.memory_bytes) add("memory=" + FormatBytes(l.memory_bytes));
  if (l.pids) add(fmt::format("pids={}", l.pids));
  if (l.cpu_millis) add("cpus=" + FormatCpus(l.cpu_millis));
  if (l.tmp_bytes) add("tmp=" + FormatBytes(l.tmp_bytes));
  if (l.nofile) add(fmt::format("nofile={}", l.nofile));
  return out.empty() ? "none" : out;
}

}  // namespace codespace
