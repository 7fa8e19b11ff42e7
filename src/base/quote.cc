#include "base/quote.h"

namespace codespace {

std::string QuoteForLine(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' ? ' ' : c);
  }
  return out + "\"";
}

}  // namespace codespace
