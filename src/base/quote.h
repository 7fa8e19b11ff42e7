// A value quoted for a one-line `key="value"` report (the posture line): backslash before `"`
// and `\`, a newline folded to a space, so that the line stays one line and splits by key.
#pragma once

#include <string>
#include <string_view>

namespace codespace {

std::string QuoteForLine(std::string_view value);

}  // namespace codespace
