#include "api/spec_check.h"

#include <fmt/format.h>

#include "base/status.h"
#include "store/record_json.h"

namespace codespace::api {

std::string FieldOfJsonError(std::string_view message) {
  constexpr std::string_view kPrefix = "run spec JSON: \"";
  size_t at = message.find(kPrefix);
  if (at == std::string_view::npos) return {};
  size_t start = at + kPrefix.size();
  size_t end = message.find("\": ", start);
  if (end == std::string_view::npos) return {};
  return std::string(message.substr(start, end - start));
}

SpecResult ParseSubmittedSpec(std::string_view body) {
  Result<RunSpec> parsed = RunSpecFromJson(body);
  if (!parsed.ok()) {
    return SpecError{parsed.status().message(), FieldOfJsonError(parsed.status().message())};
  }
  RunSpec spec = std::move(parsed).value();
  SpecError e = CheckSpec(spec);
  if (!e.ok()) return e;
  return spec;
}

}  // namespace codespace::api
