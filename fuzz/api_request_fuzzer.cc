// Fuzz target: the API's request parsing and run-spec validation (src/api/http.h,
// src/api/spec_check.h). The input is bytes off the socket: parsed as a request (repeatedly, as
// a keep-alive connection would), and every complete request's body — and the whole input — as
// a submitted run spec. Neither may crash, hang or read out of bounds (libFuzzer + ASan).
//
// `make fuzz` builds it with clang -fsanitize=fuzzer,address; the test suite links the same
// entry point to replay_main.cc (seed corpus plus deterministic mutations, no clang needed).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "api/http.h"
#include "api/spec_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  codespace::api::HttpLimits limits;
  limits.max_body_bytes = 64 * 1024;
  limits.max_head_bytes = 4096;
  std::string_view rest = input;
  for (int i = 0; i < 8 && !rest.empty(); ++i) {
    codespace::api::HttpRequest req;
    auto r = codespace::api::ParseRequest(rest, limits, &req);
    if (r.state != codespace::api::ParseState::kComplete) break;
    if (r.consumed == 0 || r.consumed > rest.size()) __builtin_trap();
    (void)codespace::api::ParseSubmittedSpec(req.body);
    rest.remove_prefix(r.consumed);
  }
  auto spec = codespace::api::ParseSubmittedSpec(input);
  if (auto* e = std::get_if<codespace::api::SpecError>(&spec)) {
    if (e->message.empty()) __builtin_trap();  // an error always says why
  }
  (void)codespace::api::PercentDecode(input, true);
  return 0;
}
